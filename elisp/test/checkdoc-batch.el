;;; checkdoc-batch.el --- Run checkdoc on files, fail on any warning  -*- lexical-binding: t; -*-

;;; Commentary:

;; emacs --batch -l checkdoc-batch.el FILE...
;; Prints each warning as FILE:LINE: TEXT and exits 1 if there was one.

;;; Code:

(require 'checkdoc)

(let ((count 0)
      (files command-line-args-left))
  (setq command-line-args-left nil)
  (dolist (file files)
    (with-current-buffer (find-file-noselect file)
      (let ((checkdoc-autofix-flag 'never)
            (checkdoc-create-error-function
             (lambda (text start _end &optional _unfixable)
               (setq count (1+ count))
               (message "%s:%d: %s" file (line-number-at-pos start) text)
               nil)))
        (checkdoc-current-buffer t))))
  (message "checkdoc: %d warning(s) in %d file(s)" count (length files))
  (kill-emacs (if (zerop count) 0 1)))

;;; checkdoc-batch.el ends here
