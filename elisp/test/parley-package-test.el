;;; parley-package-test.el --- The package built, installed with package-install-file  -*- lexical-binding: t; -*-

;;; Commentary:

;; scripts/build-emacs-package builds parley-VERSION.tar from the MELPA
;; recipe; a fresh `emacs --batch -Q' installs it with
;; `package-install-file' into an empty `package-user-dir' (no archive:
;; jsonrpc is Emacs's own).  Another fresh Emacs then finds the commands
;; through the package's autoloads alone, and M-x parley connects to the
;; real server (from $PARLEY_VENV) when it is installed.

;;; Code:

(require 'ert)
(require 'parley)
(require 'parley-test-env)

(defun parley-package-test--emacs (form)
  "Run FORM in a fresh `emacs --batch -Q'; return (EXIT-STATUS . OUTPUT)."
  (with-temp-buffer
    (let ((status (call-process (expand-file-name invocation-name invocation-directory)
                                nil t nil "--batch" "-Q"
                                "--eval" (prin1-to-string form))))
      (cons status (buffer-string)))))

(ert-deftest parley-package-installs-with-package-install-file ()
  (let* ((dir (make-temp-file "parley-package-test" t))
         (user-dir (expand-file-name "elpa" dir))
         (tarball (string-trim
                   (shell-command-to-string
                    (format "%s %s"
                            (shell-quote-argument
                             (expand-file-name "scripts/build-emacs-package" parley-test-env-repo))
                            (shell-quote-argument dir))))))
    (unwind-protect
        (progn
          (should (equal (file-name-nondirectory tarball)
                         (format "parley-%s.tar" parley-version)))
          (let ((installed
                 (parley-package-test--emacs
                  `(progn
                     (require 'package)
                     (setq package-user-dir ,user-dir package-archives nil)
                     (package-initialize)
                     (package-install-file ,tarball)
                     (require 'parley)
                     (princ (format "\nRESULT %S %S %S\n"
                                    (file-name-nondirectory
                                     (directory-file-name
                                      (file-name-directory (locate-library "parley"))))
                                    (commandp 'parley)
                                    (commandp 'parley-install-server)))))))
            (ert-info ((cdr installed))
              (should (eql (car installed) 0))
              (should (string-match-p
                       (format "^RESULT \"parley-%s\" t t$" (regexp-quote parley-version))
                       (cdr installed)))))
          ;; A later Emacs: the autoloads alone define the commands, and
          ;; M-x parley starts the server and opens a session.
          (let* ((server (and (not (parley-test-env-missing)) parley-test-env-parley))
                 (used
                  (parley-package-test--emacs
                   `(progn
                      (require 'package)
                      (setq package-user-dir ,user-dir package-archives nil)
                      (package-initialize)
                      (princ (format "\nAUTOLOADED %S %S %S\n"
                                     (featurep 'parley)
                                     (commandp 'parley)
                                     (commandp 'parley-install-server)))
                      (when ,server
                        (setq parley-server-command (list ,server "serve"))
                        (let ((default-directory ,dir))
                          (with-current-buffer (parley)
                            (princ (format "CONNECTED %S %S\n" major-mode
                                           (stringp parley--session-id))))))))))
            (ert-info ((cdr used))
              (should (eql (car used) 0))
              (should (string-match-p "^AUTOLOADED nil t t$" (cdr used)))
              (if server
                  (should (string-match-p "^CONNECTED parley-chat-mode t$" (cdr used)))
                (ert-skip (format "M-x parley not run: %s" (parley-test-env-missing)))))))
      (delete-directory dir t))))

;;; parley-package-test.el ends here
