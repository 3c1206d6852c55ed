;;; parley-structure-test.el --- The package's files and their requires  -*- lexical-binding: t; -*-

;;; Commentary:

;; The Emacs package is split by concern (docs/architecture.md, the
;; clients).  Each file has a layer below; a file requires, or declares
;; a function of, only files of lower layers, so the requires go one
;; way and there is no cycle.  A new file must be given its layer here.
;; No file (the tests' too) is over 800 lines.

;;; Code:

(require 'ert)
(require 'cl-lib)

(defconst parley-structure-test--layers
  '(;; Foundations: no other file of the package.
    ("parley-tools" "parley-files" "parley-diff" "parley-display" "parley-markdown" "parley-wire"
     "parley-windows")
    ;; The `parley serve' process and JSON-RPC.
    ("parley-connection")
    ;; The terminals the server runs commands in; the transcript's
    ;; blocks, and what fills them.
    ("parley-transcript" "parley-terminals" "parley-install")
    ("parley-tool-calls" "parley-usage" "parley-plan")
    ("parley-messages" "parley-question")
    ;; A buffer's session: the server's messages routed, its turns.
    ("parley-session")
    ;; The chat buffer's commands.
    ("parley-input" "parley-export" "parley-commands" "parley-kernels")
    ("parley-header")
    ;; The entry points and the mode.
    ("parley"))
  "The package's files, by layer, lowest first.")

(defconst parley-structure-test--dir
  (expand-file-name ".." (file-name-directory (or load-file-name buffer-file-name)))
  "The package's directory, elisp/.")

(defun parley-structure-test--layer (feature)
  "Return the layer (from 0) of the file FEATURE, or nil if it has none."
  (cl-position-if (lambda (layer) (member feature layer)) parley-structure-test--layers))

(defun parley-structure-test--uses (file)
  "Return the package's files FILE requires or declares functions of.
A list of (FORM . NAME): FORM is `require' or `declare-function'."
  (with-temp-buffer
    (insert-file-contents file)
    (goto-char (point-min))
    (let (uses form)
      (while (setq form (condition-case nil (read (current-buffer)) (end-of-file nil)))
        (pcase form
          (`(require ',(and feature (pred symbolp)) . ,_)
           (push (cons 'require (symbol-name feature)) uses))
          (`(declare-function ,_ ,(and file (pred stringp)) . ,_)
           (push (cons 'declare-function (file-name-base file)) uses))))
      (cl-remove-if-not (lambda (use) (string-prefix-p "parley" (cdr use))) uses))))

(defun parley-structure-test--files ()
  "Return the package's files, elisp/*.el."
  (directory-files parley-structure-test--dir t "\\`parley.*\\.el\\'"))

(ert-deftest parley-structure-every-file-has-a-layer ()
  (let ((names (mapcar #'file-name-base (parley-structure-test--files))))
    (should (> (length names) 10))
    (dolist (name names)
      (ert-info ((format "%s.el is in no layer of `parley-structure-test--layers'" name))
        (should (parley-structure-test--layer name))))
    (dolist (name (apply #'append parley-structure-test--layers))
      (ert-info ((format "%s.el is in the table but not in elisp/" name))
        (should (member name names))))))

(ert-deftest parley-structure-requires-go-down ()
  (let ((checked 0))
    (dolist (file (parley-structure-test--files))
      (let* ((name (file-name-base file))
             (layer (parley-structure-test--layer name)))
        (pcase-dolist (`(,form . ,used) (parley-structure-test--uses file))
          (setq checked (1+ checked))
          (ert-info ((format "%s.el (layer %s): %s of %s (layer %s)" name layer form used
                             (parley-structure-test--layer used)))
            (should (parley-structure-test--layer used))
            (should (< (parley-structure-test--layer used) layer))))))
    ;; The reader saw the requires (a table of nothing would pass).
    (should (> checked 20))))

(ert-deftest parley-structure-no-file-over-800-lines ()
  ;; The package's files, its tests' and its benchmark's.
  (dolist (file (directory-files-recursively parley-structure-test--dir "\\.el\\'"))
    (let ((lines (with-temp-buffer
                   (insert-file-contents file)
                   (count-lines (point-min) (point-max)))))
      (ert-info ((format "%s: %d lines" (file-name-nondirectory file) lines))
        (should (<= lines 800))))))

(provide 'parley-structure-test)
;;; parley-structure-test.el ends here
