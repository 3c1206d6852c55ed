;;; parley-install.el --- Install the Parley server from Emacs  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; M-x parley-install-server installs the server, the Python
;; distribution `parley-code' that brings the `parley' command, with
;; the first of uv (`uv tool install'), pipx or pip (`python3 -m pip
;; install --user') found on `exec-path'.  It names the command and
;; asks first, runs it without blocking Emacs, its output in the
;; *parley install* buffer, and says when it finished and where
;; `parley' is.

;;; Code:

(require 'seq)
(require 'subr-x)
(require 'parley-connection)

(defconst parley-install-distribution "parley-code"
  "The Python distribution of the Parley server (its command is `parley').")

(defconst parley-install-buffer-name "*parley install*"
  "The buffer that shows the install command's output.")

(defun parley-install--pip-works-p (python)
  "Return non-nil when PYTHON has pip (`PYTHON -m pip --version' succeeds)."
  (eql 0 (ignore-errors (call-process python nil nil nil "-m" "pip" "--version"))))

(defun parley-install-command ()
  "Return the command that would install the server, a list, or nil.
The first of uv, pipx and python3 with pip found on the variable `exec-path'."
  (let ((uv (executable-find "uv"))
        (pipx (executable-find "pipx"))
        (python (executable-find "python3")))
    (cond (uv (list uv "tool" "install" parley-install-distribution))
          (pipx (list pipx "install" parley-install-distribution))
          ((and python (parley-install--pip-works-p python))
           (list python "-m" "pip" "install" "--user" parley-install-distribution)))))

(defun parley-install--bin-directories ()
  "Return the directories uv, pipx and pip --user put commands in.
Their environment variables first, then ~/.local/bin, their default."
  (let ((user-base (getenv "PYTHONUSERBASE")))
    (delete-dups
     (delq nil (list (getenv "UV_TOOL_BIN_DIR")
                     (getenv "PIPX_BIN_DIR")
                     (getenv "XDG_BIN_HOME")
                     (and user-base (expand-file-name "bin" user-base))
                     (expand-file-name "~/.local/bin"))))))

(defun parley-install-find-server ()
  "Return the file name of the installed `parley' command, or nil."
  (or (executable-find "parley")
      (seq-some (lambda (dir)
                  (let ((file (expand-file-name "parley" dir)))
                    (and (file-executable-p file) file)))
                (parley-install--bin-directories))))

(defun parley-install--finished (process _event)
  "Report how PROCESS, the install command, ended, once it has."
  (unless (process-live-p process)
    (let ((status (process-exit-status process))
          (server (parley-install-find-server)))
      (when (buffer-live-p (process-buffer process))
        (with-current-buffer (process-buffer process)
          (goto-char (point-max))
          (insert (format "\n[finished with exit status %d]\n" status))))
      (cond
       ((not (zerop status))
        (message "Installing the Parley server failed (exit status %d); see %s"
                 status parley-install-buffer-name))
       ((not server)
        (message "Installed the Parley server, but found no `parley' command; \
see %s and set `parley-server-command'" parley-install-buffer-name))
       ((equal server (executable-find "parley"))
        (message "Installed the Parley server: %s" server))
       (t
        ;; Installed outside `exec-path': use it in this Emacs, and say
        ;; how to keep it.
        (setq parley-server-command (cons server (cdr parley-server-command)))
        (message "Installed the Parley server: %s (not on `exec-path'; \
`parley-server-command' now names it: customize it to keep it)" server))))))

;;;###autoload
(defun parley-install-server ()
  "Install the Parley server with uv, pipx or pip, after asking.
Runs `uv tool install parley-code' (or `pipx install', or `python3
-m pip install --user', whichever is found first) without blocking
Emacs; its output goes to the *parley install* buffer."
  (interactive)
  (when (get-buffer-process parley-install-buffer-name)
    (user-error "The Parley server is being installed; see %s" parley-install-buffer-name))
  (let ((command (or (parley-install-command)
                     (user-error "Found none of uv, pipx or python3 with pip to install \
the Parley server (%s); install one of them" parley-install-distribution))))
    (when (yes-or-no-p (format "Install the Parley server with `%s'? "
                               (string-join command " ")))
      (let ((buffer (get-buffer-create parley-install-buffer-name)))
        (with-current-buffer buffer
          (erase-buffer)
          (insert "$ " (mapconcat #'shell-quote-argument command " ") "\n"))
        (display-buffer buffer)
        (make-process :name "parley-install" :buffer buffer :command command
                      :connection-type 'pipe :noquery t
                      :sentinel #'parley-install--finished)
        (message "Installing the Parley server: %s" (string-join command " "))))))

(provide 'parley-install)
;;; parley-install.el ends here
