;;; build-package.el --- Build the Emacs package's tarball from its recipe  -*- lexical-binding: t; -*-

;;; Commentary:

;; emacs --batch -Q -l build-package.el REPO OUTDIR
;; Reads the recipe (elisp/melpa/parley), packs the files its :files
;; globs name (relative to REPO) with a generated parley-pkg.el into
;; OUTDIR/parley-VERSION.tar, as package-build does for MELPA, and
;; prints the tarball's name.  `package-install-file' installs it.

;;; Code:

(require 'package)
(require 'lisp-mnt)
(require 'seq)

(defun build-package-recipe (repo)
  "Return the recipe of the package in REPO, (NAME . PLIST)."
  (with-temp-buffer
    (insert-file-contents (expand-file-name "elisp/melpa/parley" repo))
    (read (current-buffer))))

(defun build-package-files (repo recipe)
  "Return the files RECIPE's :files globs name in REPO, sorted."
  (let ((specs (plist-get (cdr recipe) :files)))
    (dolist (spec specs)
      (unless (stringp spec)
        (error "This builder handles only glob strings in :files, not %S" spec)))
    (sort (delete-dups
           (mapcan (lambda (glob) (file-expand-wildcards (expand-file-name glob repo)))
                   specs))
          #'string<)))

(defun build-package-description (main-file)
  "Return the `package-desc' of the package whose main file is MAIN-FILE."
  (with-temp-buffer
    (insert-file-contents main-file)
    (package-buffer-info)))

(defun build-package (repo outdir)
  "Build REPO's Emacs package as a tarball in OUTDIR; return its file name."
  (let* ((recipe (build-package-recipe repo))
         (name (symbol-name (car recipe)))
         (files (build-package-files repo recipe))
         (main (or (seq-find (lambda (f) (equal (file-name-nondirectory f) (concat name ".el")))
                             files)
                   (error "The recipe's files have no %s.el" name)))
         (desc (build-package-description main))
         (dirname (format "%s-%s" name (package-version-join (package-desc-version desc))))
         (dir (expand-file-name dirname outdir))
         (tarball (expand-file-name (concat dirname ".tar") outdir)))
    (when (file-exists-p dir) (delete-directory dir t))
    (make-directory dir t)
    (dolist (file files)
      (copy-file file (expand-file-name (file-name-nondirectory file) dir)))
    (package-generate-description-file
     desc (expand-file-name (concat name "-pkg.el") dir))
    (unless (zerop (call-process "tar" nil nil nil "-cf" tarball "-C" outdir dirname))
      (error "Tar could not write %s" tarball))
    (delete-directory dir t)
    tarball))

(let ((repo (expand-file-name (pop command-line-args-left)))
      (outdir (expand-file-name (pop command-line-args-left))))
  (setq command-line-args-left nil)
  (make-directory outdir t)
  (princ (concat (build-package repo outdir) "\n")))

;;; build-package.el ends here
