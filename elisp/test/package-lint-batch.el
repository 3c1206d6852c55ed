;;; package-lint-batch.el --- Run package-lint on the package's files  -*- lexical-binding: t; -*-

;;; Commentary:

;; emacs --batch -Q -L PACKAGE-LINT-DIR -l package-lint-batch.el MAIN-FILE FILE...
;; Lints each FILE as part of the package whose main file is MAIN-FILE
;; (parley.el), prints each finding as FILE:LINE:COL: TYPE: TEXT, and
;; exits 1 if there was one, warnings included.
;;
;; Two findings are known and let through, each for a reason that is
;; not the package's:
;; - Debian 12's package-lint (0.16) predates Emacs 28.1 and says a
;;   package needing Emacs 28 is "uninstallable in all released Emacs
;;   versions"; later package-lint versions know 28 is released.
;; - The project has no public repository yet, so parley.el has no URL
;;   header (one is not invented); MELPA needs one, see elisp/README.md.
;;
;; No package archive is reached here, so the packages this Emacs has
;; built in (jsonrpc) stand for the archive's: a dependency on one is
;; checked against the version built in, not reported uninstallable.

;;; Code:

(require 'package-lint)

(defconst package-lint-batch-known
  '("This makes the package uninstallable in all released Emacs versions."
    "Package should have a Homepage or URL header.")
  "Findings let through, see the Commentary.")

(defun package-lint-batch-builtins-as-archive ()
  "Add this Emacs's built-in packages to `package-archive-contents'.
Only those the (unreachable) archives do not already list."
  (require 'package)
  (pcase-dolist (`(,name . ,version) package--builtin-versions)
    (unless (assq name package-archive-contents)
      (push (list name (package-desc-create :name name :version version :kind 'builtin))
            package-archive-contents))))

(package-lint-batch-builtins-as-archive)

(let* ((main (expand-file-name (pop command-line-args-left)))
       (files (cons main (mapcar #'expand-file-name command-line-args-left)))
       (package-lint-main-file main)
       (count 0))
  (setq command-line-args-left nil)
  (dolist (file (delete-dups files))
    (with-temp-buffer
      (insert-file-contents file t)
      (emacs-lisp-mode)
      (pcase-dolist (`(,line ,col ,type ,text) (package-lint-buffer))
        (if (member text package-lint-batch-known)
            (message "%s:%d:%d: %s (known, let through): %s"
                     (file-name-nondirectory file) line col type text)
          (setq count (1+ count))
          (message "%s:%d:%d: %s: %s" (file-name-nondirectory file) line col type text)))))
  (message "package-lint: %d finding(s) in %d file(s)" count (length files))
  (kill-emacs (if (zerop count) 0 1)))

;;; package-lint-batch.el ends here
