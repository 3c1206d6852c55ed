;;; parley-kernels.el --- A Parley session on the user's own Jupyter kernel  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; M-x parley-attach-kernel (C-c C-j) attaches the chat buffer's
;; session to a Jupyter kernel the user already works in, or back to
;; Parley's own (docs/protocol.md, "The user's own kernel").  It
;; offers the kernels running here (`parley kernels --json', run as a
;; process: Emacs keeps reading the server while it runs), the choices
;; of the session's `kernel' config option, and, when emacs-jupyter is
;; loaded, the kernel of each of its REPL or notebook clients.
;;
;; A kernel the option offers is chosen with `session/set_config_option';
;; another (an emacs-jupyter kernel, whose connection file is not in
;; Jupyter's runtime directory under a name Parley lists) with
;; `session/resume' and `_meta.parley.kernel'.  The header line shows
;; the option's current choice, by the server's name for it.

;;; Code:

(require 'cl-lib)
(require 'eieio)
(require 'jsonrpc)
(require 'parley-connection)
(require 'parley-session)
(require 'parley-transcript)
(require 'parley-wire)

(defconst parley-kernels-own "parley"
  "The `kernel' option's value that means Parley's own kernel.")

(defconst parley-kernels-option "kernel"
  "The id of the session's config option that says which kernel it uses.")

;;;; Which kernel the session uses

(defun parley--kernel-option ()
  "Return the session's `kernel' config option, or nil."
  (parley--config-option :id parley-kernels-option))

(defun parley--kernel-shown ()
  "Return the server's name of the user's kernel the session is attached to.
Nil while it uses Parley's own."
  (let* ((option (parley--kernel-option))
         (current (plist-get option :currentValue)))
    (when (and (stringp current) (not (equal current parley-kernels-own)))
      (let ((name (plist-get (cdr (assoc current (parley--config-choices option))) :name)))
        (if (stringp name) name current)))))

;;;; The running kernels

(defun parley--kernels-command ()
  "Return the command that lists the running kernels: `parley kernels --json'.
It is `parley-server-command' with `kernels --json' in place of `serve'."
  (let ((serve (member "serve" parley-server-command)))
    (append (if serve
                (butlast parley-server-command (length serve))
              (list (car parley-server-command)))
            '("kernels" "--json"))))

(defun parley--running-kernels ()
  "Return the Jupyter kernels running here, as plists, newest first.
Each has :connectionFile, :kernelId, :started (seconds since the
epoch) and :notebook (nil when no Jupyter Server says).  The command
runs as a process; while it runs Emacs goes on reading the server,
and \\[keyboard-quit] stops waiting."
  (let* ((process-environment (append parley-server-environment process-environment))
         (output (generate-new-buffer " *parley kernels*"))
         (errors (generate-new-buffer " *parley kernels stderr*"))
         (process (make-process :name "parley-kernels" :buffer output
                                :command (parley--kernels-command)
                                :connection-type 'pipe :noquery t :stderr errors
                                :sentinel #'ignore))
         (deadline (+ (float-time) parley-request-timeout)))
    (unwind-protect
        (progn
          (while (and (process-live-p process) (< (float-time) deadline))
            (accept-process-output process 0.05))
          (when (process-live-p process)
            (user-error "Parley: `parley kernels' did not answer in %s seconds"
                        parley-request-timeout))
          (unless (zerop (process-exit-status process))
            (user-error "Parley: `parley kernels' failed: %s"
                        (string-trim (with-current-buffer errors (buffer-string)))))
          (with-current-buffer output
            (append (json-parse-string (buffer-string) :object-type 'plist
                                       :null-object nil :false-object nil)
                    nil)))
      (when (process-live-p process) (delete-process process))
      (kill-buffer output)
      (kill-buffer errors))))

(defun parley--kernel-annotation (kernel)
  "Return the text beside the candidate of the running KERNEL."
  (let ((notebook (plist-get kernel :notebook))
        (started (plist-get kernel :started)))
    (concat (if (stringp notebook) (concat "  " notebook) "")
            (if (numberp started)
                (format-time-string "  started %Y-%m-%d %H:%M" (seconds-to-time started))
              ""))))

;;;; emacs-jupyter's kernels

;; emacs-jupyter keeps a buffer's client in the buffer-local
;; `jupyter-current-client' (its REPL buffers, and the buffers
;; associated with one), and the client's connection info, the
;; contents of a connection file, in its session
;; (`jupyter-session-conn-info').  Its own connection file is not
;; where Parley looks (Jupyter's runtime directory, `kernel-*.json'),
;; so the info is written to a file of Parley's, readable by the user
;; only, as Jupyter writes its own.

(defvar jupyter-current-client)
(declare-function jupyter-session-conn-info "ext:jupyter-base" (session))

(defvar parley--jupyter-files nil
  "The connection files written for emacs-jupyter's kernels, deleted on exit.")

(defun parley--jupyter-clients ()
  "Return emacs-jupyter's clients as (BUFFER-NAME . CLIENT), most recent first.
Only those whose connection info Parley can read; nil when
emacs-jupyter is not loaded."
  (when (and (boundp 'jupyter-current-client) (fboundp 'jupyter-session-conn-info))
    (let (clients)
      (dolist (buffer (buffer-list))
        (let ((client (buffer-local-value 'jupyter-current-client buffer)))
          (when (and client (local-variable-p 'jupyter-current-client buffer)
                     (not (rassq client clients))
                     (parley--jupyter-conn-info client))
            (push (cons (buffer-name buffer) client) clients))))
      (nreverse clients))))

(defun parley--jupyter-conn-info (client)
  "Return the connection info (a plist) of emacs-jupyter's CLIENT, or nil."
  (when (and (eieio-object-p client) (slot-exists-p client 'session)
             (slot-boundp client 'session))
    ;; A slot of emacs-jupyter's class, unknown when Parley is compiled.
    (jupyter-session-conn-info (with-no-warnings (slot-value client 'session)))))

(defun parley--jupyter-connection-file (client)
  "Write CLIENT's connection info to a file of the user's only; return its name."
  (let ((info (or (parley--jupyter-conn-info client)
                  (user-error "Parley: this emacs-jupyter client has no connection info"))))
    ;; `make-temp-file' creates the file readable by the user only (mode 600).
    (let ((file (make-temp-file "parley-jupyter-kernel-" nil ".json"
                                (json-serialize info))))
      (unless parley--jupyter-files
        (add-hook 'kill-emacs-hook #'parley--delete-jupyter-files))
      (push file parley--jupyter-files)
      file)))

(defun parley--delete-jupyter-files ()
  "Delete the connection files written for emacs-jupyter's kernels."
  (dolist (file parley--jupyter-files)
    (ignore-errors (delete-file file)))
  (setq parley--jupyter-files nil))

;;;; Attaching

(defun parley--kernel-candidates ()
  "Return the kernels to choose from, an alist (SHOWN . PLIST).
PLIST has :value (the `kernel' option's value, a connection file, or
a function returning one) and :annotation."
  (let* ((option (parley--kernel-option))
         (choices (parley--config-choices option))
         (candidates nil))
    (cl-flet ((add (shown value annotation)
                (unless (cl-find value candidates :key (lambda (c) (plist-get (cdr c) :value))
                                 :test #'equal)
                  (push (cons shown (list :value value :annotation annotation)) candidates))))
      ;; The option's own choices first: Parley's own, the kernel attached now.
      (dolist (choice choices)
        (when (or (equal (car choice) parley-kernels-own)
                  (equal (car choice) (plist-get option :currentValue)))
          (add (or (plist-get (cdr choice) :name) (car choice)) (car choice)
               (let ((description (plist-get (cdr choice) :description)))
                 (if (stringp description) (concat "  " description) "")))))
      (dolist (kernel (parley--running-kernels))
        (let ((file (plist-get kernel :connectionFile)))
          (add (abbreviate-file-name file) file (parley--kernel-annotation kernel))))
      (dolist (client (parley--jupyter-clients))
        (let ((jupyter (cdr client)))
          (add (car client) (lambda () (parley--jupyter-connection-file jupyter))
               "  emacs-jupyter's kernel"))))
    (nreverse candidates)))

(defun parley--read-kernel ()
  "Read a kernel in the minibuffer; return the chosen candidate's plist."
  (let* ((candidates (parley--kernel-candidates))
         (current (car (cl-find (plist-get (parley--kernel-option) :currentValue) candidates
                                :key (lambda (c) (plist-get (cdr c) :value)) :test #'equal)))
         (chosen (completing-read
                  "Attach to kernel: "
                  (lambda (string pred action)
                    (if (eq action 'metadata)
                        `(metadata
                          (display-sort-function . identity)
                          (annotation-function
                           . ,(lambda (shown)
                                (plist-get (cdr (assoc shown candidates)) :annotation))))
                      (complete-with-action action candidates string pred)))
                  nil t nil nil current)))
    (cdr (or (assoc chosen candidates) (user-error "No kernel chosen")))))

;;;###autoload
(defun parley-attach-kernel (kernel)
  "Run this chat buffer's Python tools in KERNEL, a Jupyter kernel of yours.
KERNEL is the value of the session's `kernel' option (\"parley\":
Parley's own sandboxed kernel), or a kernel's connection file.
Interactively, choose among Parley's own, the kernels running here
\(with their notebooks, where a Jupyter Server says, and when they
started) and emacs-jupyter's REPL and notebook kernels, when it is
loaded.  In your kernel, evaluation is not sandboxed: Parley asks
every time."
  (interactive
   (progn
     (parley--check-buffer)
     (unless (parley--kernel-option)
       (user-error "This session offers no kernel to choose"))
     (let ((value (plist-get (parley--read-kernel) :value)))
       (list (if (functionp value) (funcall value) value)))))
  (parley--check-buffer)
  (when (or parley--busy parley--questions)
    (user-error "Parley is answering; attach the kernel once the turn ends"))
  (let ((buffer (current-buffer))
        (offered (assoc kernel (parley--config-choices (parley--kernel-option)))))
    (parley--with-session
     (lambda (conn)
       (let ((done (lambda (result)
                     (parley--with-live-buffer buffer
                       (parley--session-result result)
                       (message "Parley: %s: %s"
                                (or (plist-get (parley--kernel-option) :name) "Kernel")
                                (or (parley--kernel-shown) (parley--kernel-own-name))))))
             (failed (lambda (err)
                       (message "Parley cannot attach the kernel: %s"
                                (plist-get err :message)))))
         (if offered
             (jsonrpc-async-request
              conn 'session/set_config_option
              (list :sessionId parley--session-id :configId parley-kernels-option
                    :value kernel)
              :timeout parley-request-timeout :success-fn done :error-fn failed)
           (jsonrpc-async-request
            conn 'session/resume
            (append (list :sessionId parley--session-id :cwd parley--cwd :mcpServers [])
                    (parley--roots-params parley--cwd)
                    (parley-wire-with-meta :kernel (list :connectionFile kernel)))
            :timeout parley-request-timeout :success-fn done :error-fn failed)))))))

(defun parley--kernel-own-name ()
  "Return the server's name of Parley's own kernel."
  (or (plist-get (cdr (assoc parley-kernels-own
                             (parley--config-choices (parley--kernel-option))))
                 :name)
      parley-kernels-own))

(provide 'parley-kernels)
;;; parley-kernels.el ends here
