;;; parley-install-test.el --- M-x parley-install-server, with stand-in installers  -*- lexical-binding: t; -*-

;;; Commentary:

;; uv, pipx and python3 are stand-in scripts on a temporary `exec-path'
;; and PATH: each records its arguments and exits as told, a uv that
;; succeeds also puts a `parley' where uv would.  The real (network)
;; install is never run.  Also: starting a chat without the server
;; names M-x parley-install-server and `parley-server-command'.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)

(defun parley-install-test--program (dir name body)
  "Write the shell script NAME in DIR running BODY; return its file name."
  (let ((file (expand-file-name name dir)))
    (make-directory dir t)
    (with-temp-file file (insert "#!/bin/sh\n" body "\n"))
    (set-file-modes file #o755)
    file))

(defmacro parley-install-test--with-programs (programs &rest body)
  "Run BODY with the stand-in PROGRAMS alone on the variable `exec-path'.
PROGRAMS is a list of (NAME SHELL-BODY).  In BODY, `dir' is a fresh
directory: the programs are in DIR/bin, $RECORD is DIR/args, and
$UV_TOOL_BIN_DIR is DIR/installed (no `parley' there at first)."
  (declare (indent 1))
  `(let* ((dir (make-temp-file "parley-install-test" t))
          (bin (expand-file-name "bin" dir))
          (exec-path (list bin))
          (process-environment
           (append (list (concat "PATH=" bin ":/usr/bin:/bin")
                         (concat "RECORD=" (expand-file-name "args" dir))
                         (concat "UV_TOOL_BIN_DIR=" (expand-file-name "installed" dir))
                         "PIPX_BIN_DIR" "XDG_BIN_HOME" "PYTHONUSERBASE")
                   process-environment))
          (parley-server-command '("parley" "serve")))
     (make-directory bin t)
     (dolist (program ,programs)
       (parley-install-test--program bin (car program) (cadr program)))
     (unwind-protect (progn ,@body)
       (when (get-buffer parley-install-buffer-name)
         (kill-buffer parley-install-buffer-name))
       (delete-directory dir t))))

(defconst parley-install-test--uv-installs
  (concat "printf '%s\\n' \"$@\" > \"$RECORD\"\n"
          "echo 'Installed 1 executable: parley'\n"
          "mkdir -p \"$UV_TOOL_BIN_DIR\"\n"
          "printf '#!/bin/sh\\n' > \"$UV_TOOL_BIN_DIR/parley\"\n"
          "chmod +x \"$UV_TOOL_BIN_DIR/parley\"")
  "A uv that records its arguments and puts a `parley' where uv would.")

(defun parley-install-test--run (answer)
  "Run the install with ANSWER to its question; wait (up to 30 s) for it.
Return the question's prompts and the messages, a list of two lists."
  (let (prompts messages)
    (cl-letf (((symbol-function 'yes-or-no-p)
               (lambda (prompt) (push prompt prompts) answer))
              ((symbol-function 'message)
               (lambda (format &rest args)
                 (when format (push (apply #'format-message format args) messages)))))
      (parley-install-server)
      (let ((process (get-buffer-process parley-install-buffer-name))
            (deadline (+ (float-time) 30)))
        ;; Until the sentinel has said how it ended.
        (while (and process (< (float-time) deadline)
                    (not (cl-some (lambda (m) (string-match-p "\\`Installed\\|failed" m))
                                  messages)))
          (accept-process-output process 0.1))))
    (list (nreverse prompts) (nreverse messages))))

(defun parley-install-test--file (dir name)
  "Return the text of DIR/NAME, or nil when there is no such file."
  (let ((file (expand-file-name name dir)))
    (and (file-exists-p file)
         (with-temp-buffer (insert-file-contents file) (buffer-string)))))

(ert-deftest parley-install-server-with-uv-asks-runs-and-says-where ()
  (parley-install-test--with-programs
      `(("uv" ,parley-install-test--uv-installs)
        ("pipx" "echo pipx >> \"$RECORD\""))
    (pcase-let ((`(,prompts ,messages) (parley-install-test--run t))
                (server (expand-file-name "installed/parley" dir)))
      (should (equal prompts (list (format "Install the Parley server with `%s tool install parley-code'? "
                                           (expand-file-name "uv" bin)))))
      (should (equal (parley-install-test--file dir "args") "tool\ninstall\nparley-code\n"))
      (with-current-buffer parley-install-buffer-name
        (should (string-match-p "Installed 1 executable: parley" (buffer-string)))
        (should (string-match-p "finished with exit status 0" (buffer-string))))
      (should (cl-some (lambda (m) (string-prefix-p (format "Installed the Parley server: %s" server) m))
                       messages))
      ;; Not on `exec-path': this Emacs now starts that one.
      (should (equal parley-server-command (list server "serve"))))))

(ert-deftest parley-install-server-runs-once-at-a-time ()
  (parley-install-test--with-programs
      '(("uv" "echo \"$@\" >> \"$RECORD\"; exec sleep 30"))
    (cl-letf (((symbol-function 'yes-or-no-p) #'always))
      (parley-install-server)
      (let ((process (get-buffer-process parley-install-buffer-name)))
        (unwind-protect
            (should (string-match-p "being installed"
                                    (cadr (should-error (parley-install-server)
                                                        :type 'user-error))))
          (delete-process process))))))

(ert-deftest parley-install-server-declined-runs-nothing ()
  (parley-install-test--with-programs
      '(("pipx" "echo \"$@\" > \"$RECORD\""))
    (pcase-let ((`(,prompts ,_) (parley-install-test--run nil)))
      (should (equal prompts (list (format "Install the Parley server with `%s install parley-code'? "
                                           (expand-file-name "pipx" bin)))))
      (should-not (get-buffer-process parley-install-buffer-name))
      (should-not (parley-install-test--file dir "args")))))

(ert-deftest parley-install-server-failure-is-said ()
  (parley-install-test--with-programs
      '(("uv" "echo 'error: no network' >&2; exit 2"))
    (pcase-let ((`(,_ ,messages) (parley-install-test--run t)))
      (should (member "Installing the Parley server failed (exit status 2); see *parley install*"
                      messages))
      (with-current-buffer parley-install-buffer-name
        (should (string-match-p "error: no network" (buffer-string))))
      (should (equal parley-server-command '("parley" "serve"))))))

(ert-deftest parley-install-command-picks-uv-then-pipx-then-pip ()
  (let ((pip-ok "[ \"$1 $2\" = '-m pip' ] && exit 0; exit 1"))
    (parley-install-test--with-programs `(("python3" ,pip-ok) ("pipx" "") ("uv" ""))
      (should (equal (cdr (parley-install-command)) '("tool" "install" "parley-code"))))
    (parley-install-test--with-programs `(("python3" ,pip-ok) ("pipx" ""))
      (should (equal (cdr (parley-install-command)) '("install" "parley-code"))))
    (parley-install-test--with-programs `(("python3" ,pip-ok))
      (should (equal (cdr (parley-install-command))
                     '("-m" "pip" "install" "--user" "parley-code"))))
    ;; A python3 without pip, or nothing at all: no command, and the
    ;; command says what is missing.
    (parley-install-test--with-programs '(("python3" "exit 1"))
      (should-not (parley-install-command))
      (should (string-match-p "Found none of uv, pipx or python3 with pip"
                              (cadr (should-error (parley-install-server) :type 'user-error)))))))

(ert-deftest parley-missing-server-names-the-installer ()
  (parley-install-test--with-programs '()
    (let ((default-directory dir)
          (parley--connection nil))
      (let ((err (should-error (parley) :type 'user-error)))
        (should (string-match-p "M-x parley-install-server" (cadr err)))
        (should (string-match-p "parley-server-command" (cadr err))))
      (should-not (get-process "parley")))))

;;; parley-install-test.el ends here
