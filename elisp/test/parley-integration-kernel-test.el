;;; parley-integration-kernel-test.el --- The user's own kernel from Emacs, against the real server  -*- lexical-binding: t; -*-

;;; Commentary:

;; M-x parley-attach-kernel (parley-kernels.el) against `parley serve'
;; and the fake LLM, with a real ipykernel the test starts through
;; jupyter_client, as a notebook or `jupyter console' starts one, its
;; connection file in a Jupyter runtime directory of the test's own.
;; emacs-jupyter is not installed here: its branch is tested with a
;; stand-in defined below, with the names emacs-jupyter uses
;; (`jupyter-current-client', a client whose `session' slot holds a
;; `jupyter-session' with its `conn-info'), not with emacs-jupyter.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'eieio)
(require 'parley-integration-test)   ; parley, parley-test and the real server's helpers

(defconst parley-kernel-it--start-kernel "
import sys
from jupyter_client.manager import KernelManager
manager = KernelManager(kernel_name='python3', connection_file=sys.argv[1])
manager.start_kernel()
client = manager.client()
client.start_channels()
client.wait_for_ready(timeout=60)
client.execute_interactive(sys.argv[2], timeout=60)
print('ready', flush=True)
try:
    sys.stdin.read()
finally:
    client.stop_channels()
    manager.shutdown_kernel(now=True)
"
  "Python that starts the user's kernel, runs their cell, and waits for stdin's end.")

(defun parley-kernel-it--start (runtime cell)
  "Start the user's kernel, its connection file in RUNTIME; run CELL in it.
Return (PROCESS . CONNECTION-FILE) once the cell ran."
  (let* ((file (expand-file-name "kernel-emacs-test.json" runtime))
         (process-environment (append (list (concat "JUPYTER_RUNTIME_DIR=" runtime)
                                            (concat "IPYTHONDIR=" runtime "ipython"))
                                      process-environment))
         (buffer (generate-new-buffer " *users-kernel*"))
         (process (make-process :name "users-kernel" :buffer buffer
                                :command (list parley-test-env-python "-c"
                                               parley-kernel-it--start-kernel file cell)
                                :connection-type 'pipe :noquery t)))
    (parley-it--wait (lambda () (or (with-current-buffer buffer
                                      (string-match-p "^ready$" (buffer-string)))
                                    (not (process-live-p process))))
                     "the user's kernel" 90)
    (unless (process-live-p process)
      (error "The user's kernel did not start: %s" (with-current-buffer buffer (buffer-string))))
    (cons process file)))

(defun parley-kernel-it--stop (kernel)
  "Stop the user's KERNEL (as `parley-kernel-it--start' returned it)."
  (let ((process (car kernel)))
    (when (process-live-p process)
      (process-send-eof process)
      (parley-it--wait (lambda () (not (process-live-p process))) "the kernel's end" 30))
    (kill-buffer (process-buffer process))))

(defmacro parley-kernel-it--with-kernel (kernel cell &rest body)
  "Run BODY with KERNEL bound to the user's running kernel, which ran CELL.
The server and `parley kernels' see its runtime directory."
  (declare (indent 2))
  `(let* ((runtime (file-name-as-directory (make-temp-file "parley-runtime-" t)))
          (,kernel (parley-kernel-it--start runtime ,cell))
          (parley-server-environment (cons (concat "JUPYTER_RUNTIME_DIR=" runtime)
                                           parley-server-environment)))
     (unwind-protect
         (progn ,@body)
       (parley-shutdown)
       (parley-kernel-it--stop ,kernel)
       (delete-directory runtime t))))

(defun parley-kernel-it--describe (target)
  "Script the fake LLM to call python_describe of TARGET, then answer."
  (parley-it--script
   (list :tool_calls (vector (list :name "python_describe" :arguments (list :target target))))
   (list :text "Described.")))

(defun parley-kernel-it--choose (typed)
  "Attach the current buffer's session: M-x parley-attach-kernel, TYPED, TAB, RET."
  (set-window-buffer (selected-window) (current-buffer))
  (should-not (condition-case err
                  (progn (execute-kbd-macro (vconcat (kbd "M-x") "parley-attach-kernel"
                                                     (kbd "RET") typed (kbd "TAB RET")))
                         nil)
                (error err))))

(parley-it--deftest parley-kernel-it-attach-from-the-list
  "M-x parley-attach-kernel offers the running kernel; the tools then answer from it."
  (parley-kernel-it--with-kernel kernel "answer = 6 * 7"
    (with-current-buffer (parley t)
      (should-not (string-match-p "kernel of" (parley--header-line)))
      ;; Offered: Parley's own, and the running kernel with when it started.
      (let ((candidates (parley--kernel-candidates))
            (shown (abbreviate-file-name (cdr kernel))))
        (should (equal (mapcar #'car candidates) (list "Parley's own" shown)))
        (should (string-match-p "\\`  started [0-9]\\{4\\}-[0-9][0-9]-[0-9][0-9] [0-9:]\\{5\\}\\'"
                                (plist-get (cdr (assoc shown candidates)) :annotation)))
        (parley-kernel-it--choose shown))
      (parley-it--wait (lambda () (string-match-p
                                   (regexp-quote (concat "the kernel of " (cdr kernel)))
                                   (parley--header-line)))
                       "the kernel in the header line")
      (parley-kernel-it--describe "answer")
      (parley-it--send "What is answer?")
      (parley-it--wait-idle 60)
      (should (string-match-p "Describe `answer` in your kernel" (parley-it--transcript)))
      (should (string-match-p "42" (car (last (parley-it--tool-messages)))))
      ;; Back to Parley's own: the header says no kernel of the user's.
      (parley-kernel-it--choose "Parley's")
      (parley-it--wait (lambda () (not (string-match-p "kernel of" (parley--header-line))))
                       "Parley's own kernel in the header line")
      (should (equal (plist-get (parley--kernel-option) :currentValue) "parley")))))

(ert-deftest parley-kernel-candidate-shows-notebook-and-start ()
  "A running kernel's candidate shows its notebook, where known, and when it started."
  (should (string-match-p
           "\\`  work/analysis.ipynb  started 2025-11-2[89] [0-9][0-9]:[0-9][0-9]\\'"
           (parley--kernel-annotation (list :notebook "work/analysis.ipynb"
                                            :started 1764374400.5))))
  (should (equal (parley--kernel-annotation (list :notebook nil :started nil)) "")))

;;;; emacs-jupyter, by a stand-in

;; The names emacs-jupyter defines, defined here when it is not loaded:
;; the test is about Parley's side of them.
(defvar jupyter-current-client nil)
(unless (fboundp 'jupyter-session-conn-info)
  (cl-defstruct (jupyter-session (:constructor parley-kernel-it--session (conn-info)))
    conn-info))
(defclass parley-kernel-it--client () ((session :initarg :session))
  "A stand-in for emacs-jupyter's `jupyter-kernel-client'.")

(parley-it--deftest parley-kernel-it-attach-emacs-jupyters-kernel
  "An emacs-jupyter REPL's kernel is offered, attached by its connection info."
  (parley-kernel-it--with-kernel kernel "seen_from = 'the REPL'"
    (let* ((info (json-parse-string (with-temp-buffer
                                      (insert-file-contents (cdr kernel))
                                      (buffer-string))
                                    :object-type 'plist))
           (repl (get-buffer-create "*jupyter-repl[python3]*")))
      ;; Out of the runtime directory: only emacs-jupyter knows the kernel.
      (delete-file (cdr kernel))
      (with-current-buffer repl
        (setq-local jupyter-current-client
                    (make-instance 'parley-kernel-it--client
                                   :session (parley-kernel-it--session info))))
      (unwind-protect
          (with-current-buffer (parley t)
            (let ((candidates (parley--kernel-candidates)))
              (should (equal (mapcar #'car candidates)
                             (list "Parley's own" "*jupyter-repl[python3]*")))
              (should (equal (plist-get (cdr (assoc "*jupyter-repl[python3]*" candidates))
                                        :annotation)
                             "  emacs-jupyter's kernel")))
            (parley-kernel-it--choose "*jupyter-repl[python3]*")
            (parley-it--wait (lambda () (string-match-p "the kernel of /"
                                                        (parley--header-line)))
                             "the kernel in the header line")
            ;; Its connection file is Parley's copy, the user's alone.
            (let ((file (plist-get (parley--kernel-option) :currentValue)))
              (should (member file parley--jupyter-files))
              (should (= (file-modes file) #o600)))
            (parley-kernel-it--describe "seen_from")
            (parley-it--send "Where is this from?")
            (parley-it--wait-idle 60)
            (should (string-match-p "Describe `seen_from` in your kernel"
                                    (parley-it--transcript)))
            (should (string-match-p "the REPL" (car (last (parley-it--tool-messages))))))
        (kill-buffer repl)
        (parley--delete-jupyter-files)))))

(provide 'parley-integration-kernel-test)
;;; parley-integration-kernel-test.el ends here
