;;; parley-diff.el --- Line diffs of the edits Parley proposes  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; An edit comes from the server as ACP `diff' content: a path, the
;; old text (nil for a new file) and the new text.  This file turns it
;; into a unified diff, computed in Lisp (Myers' line diff, so no
;; `diff' program is needed and nothing runs asynchronously): as text
;; with `diff-mode' faces for the transcript and the permission
;; question, as a full `diff-mode' buffer, and as the counts of lines
;; added and removed.

;;; Code:

(require 'cl-lib)
(require 'diff-mode)
(require 'subr-x)

(defconst parley-diff-context 3
  "Lines of context around each change in a hunk.")

(defconst parley-diff-max-edits 400
  "Most line insertions and deletions the line diff searches for.
A change larger than this is shown as the whole middle of the file
removed and added, which costs nothing to compute.")

;;;; The line diff

(defun parley-diff--lines (text)
  "Return TEXT's lines as a vector; nil TEXT (no file) has none."
  (if (or (null text) (string-empty-p text))
      []
    (vconcat (split-string (string-remove-suffix "\n" text) "\n"))))

(defun parley-diff--myers (a b from-a to-a from-b to-b)
  "Return the edits from A[FROM-A..TO-A) to B[FROM-B..TO-B) (vectors of lines).
The result is a list, in order, of (equal I J), (delete I) and
\(insert J), I and J being indices in A and B; nil when more than
`parley-diff-max-edits' edits would be needed."
  (let* ((n (- to-a from-a))
         (m (- to-b from-b))
         (max (min (+ n m) parley-diff-max-edits))
         (offset (1+ max))
         (v (make-vector (+ 3 (* 2 max)) 0))
         (trace nil)
         (found nil)
         (d 0))
    (cl-flet ((same (x y) (equal (aref a (+ from-a x)) (aref b (+ from-b y)))))
      ;; Forward: the furthest x on each diagonal k after d edits.
      (while (and (not found) (<= d max))
        (push (cl-subseq v (- offset d) (+ offset d 1)) trace)
        (let ((k (- d)))
          (while (and (not found) (<= k d))
            (let* ((x (if (or (= k (- d))
                              (and (/= k d)
                                   (< (aref v (+ offset k -1)) (aref v (+ offset k 1)))))
                          (aref v (+ offset k 1))
                        (1+ (aref v (+ offset k -1)))))
                   (y (- x k)))
              (while (and (< x n) (< y m) (same x y))
                (setq x (1+ x) y (1+ y)))
              (aset v (+ offset k) x)
              (when (and (>= x n) (>= y m))
                (setq found t)))
            (setq k (+ k 2))))
        (unless found (setq d (1+ d))))
      (when found
        ;; Backward through the saved diagonals: the edits, last first.
        (let ((x n) (y m) (edits nil))
          (dolist (saved trace)         ; newest (this d) first
            (let* ((k (- x y))
                   (at (lambda (kk) (aref saved (+ kk d))))
                   (prev-k (if (or (= k (- d))
                                   (and (/= k d)
                                        (< (funcall at (1- k)) (funcall at (1+ k)))))
                               (1+ k)
                             (1- k)))
                   (prev-x (if (= d 0) 0 (funcall at prev-k)))
                   (prev-y (if (= d 0) 0 (- prev-x prev-k))))
              (while (and (> x prev-x) (> y prev-y))
                (setq x (1- x) y (1- y))
                (push (list 'equal (+ from-a x) (+ from-b y)) edits))
              (when (> d 0)
                (if (= x prev-x)
                    (push (list 'insert (+ from-b (1- y))) edits)
                  (push (list 'delete (+ from-a (1- x))) edits)))
              (setq x prev-x y prev-y d (1- d))))
          edits)))))

(defun parley-diff--edits (a b)
  "Return the edits that turn the line vector A into B (see `parley-diff--myers')."
  (let* ((n (length a)) (m (length b))
         (head 0) (tail 0))
    ;; The common start and end cost nothing; an edit touches the middle.
    (while (and (< head n) (< head m) (equal (aref a head) (aref b head)))
      (setq head (1+ head)))
    (while (and (< tail (- n head)) (< tail (- m head))
                (equal (aref a (- n tail 1)) (aref b (- m tail 1))))
      (setq tail (1+ tail)))
    (append
     (cl-loop for i below head collect (list 'equal i i))
     (or (parley-diff--myers a b head (- n tail) head (- m tail))
         (append (cl-loop for i from head below (- n tail) collect (list 'delete i))
                 (cl-loop for j from head below (- m tail) collect (list 'insert j))))
     (cl-loop for i from (- n tail) below n
              collect (list 'equal i (+ i (- m n)))))))

(defun parley-diff--hunks (edits)
  "Group EDITS into hunks: lists of edits with their context.
Changes closer than twice `parley-diff-context' lines share a hunk."
  (let* ((edits (vconcat edits))
         (count (length edits))
         (changed (cl-loop for i below count
                           unless (eq (car (aref edits i)) 'equal) collect i))
         (hunks nil))
    (while changed
      (let* ((start (max 0 (- (car changed) parley-diff-context)))
             (last (car changed)))
        (setq changed (cdr changed))
        (while (and changed (<= (- (car changed) last) (1+ (* 2 parley-diff-context))))
          (setq last (car changed) changed (cdr changed)))
        (push (cl-loop for i from start below (min count (+ last parley-diff-context 1))
                       collect (aref edits i))
              hunks)))
    (nreverse hunks)))

(defun parley-diff--hunk-header (hunk &optional first-line)
  "Return the @@ line of HUNK, numbered as diff -u numbers it.
FIRST-LINE, when non-nil, is the line of the file the texts start
at (a part of a file, such as a replayed edit's), 1 by default."
  (let ((old (cl-remove 'insert hunk :key #'car))
        (new (cl-remove 'delete hunk :key #'car))
        (shift (1- (or first-line 1))))
    ;; A side without lines in a hunk is an empty file (a hunk has
    ;; context otherwise): diff -u numbers it 0.
    (format "@@ -%d,%d +%d,%d @@"
            (if old (+ shift (1+ (nth 1 (car old)))) 0) (length old)
            (if new (+ shift (1+ (car (last (car new))))) 0) (length new))))

;;;; What callers use

(defun parley-diff-lines (path old new &optional first-line)
  "Return the unified diff of PATH from OLD (nil: a new file) to NEW.
The value is a list of (FACE . LINE), LINE without its newline.
FIRST-LINE is the line of the file OLD and NEW start at (default 1)."
  (let* ((a (parley-diff--lines old))
         (b (parley-diff--lines new))
         (edits (parley-diff--edits a b)))
    (append
     (list (cons 'diff-file-header (concat "--- " (if old path "/dev/null")))
           (cons 'diff-file-header (concat "+++ " path)))
     (cl-loop
      for hunk in (parley-diff--hunks edits)
      collect (cons 'diff-hunk-header (parley-diff--hunk-header hunk first-line))
      append (mapcar (lambda (edit)
                       (pcase edit
                         (`(equal ,_ ,j) (cons 'diff-context (concat " " (aref b j))))
                         (`(delete ,i) (cons 'diff-removed (concat "-" (aref a i))))
                         (`(insert ,j) (cons 'diff-added (concat "+" (aref b j))))))
                     hunk)))))

(defun parley-diff-string (path old new &optional indent first-line)
  "Return the unified diff of PATH from OLD to NEW in `diff-mode' faces.
Each line starts with INDENT (default none) and ends in a newline.
FIRST-LINE is the line of the file OLD and NEW start at (default 1)."
  (mapconcat (lambda (line)
               (propertize (concat indent (cdr line) "\n") 'face (car line)))
             (parley-diff-lines path old new first-line) ""))

(defun parley-diff-item-string (item root &optional indent)
  "Return the ACP diff ITEM as text, by `parley-diff-string'.
Its path is relative to ROOT; each line starts with INDENT.  An item
Parley made of a part of a file (`parley-diff-of-edit') is numbered
from its `:parleyFirstLine'."
  (parley-diff-string (parley-diff-path item root) (plist-get item :oldText)
                      (plist-get item :newText) indent (plist-get item :parleyFirstLine)))

(defun parley-diff-of-edit (path old-text new-text line)
  "Return an ACP diff item of an edit of PATH replacing OLD-TEXT by NEW-TEXT.
LINE is the line of the file the change starts at (the edit's
location), from which the texts' lines are numbered; nil if unknown.
The edit of a replayed session, whose call is stored with its
arguments, not with the whole file."
  (let* ((a (parley-diff--lines old-text))
         (b (parley-diff--lines new-text))
         (same (cl-loop for i below (min (length a) (length b))
                        while (equal (aref a i) (aref b i)) count t)))
    (list :type "diff" :path path :oldText old-text :newText new-text
          :parleyFirstLine (and (natnump line) (> line same) (- line same)))))

(defun parley-diff-stats (old new)
  "Count the lines added and removed from OLD to NEW: (ADDED . REMOVED)."
  (let ((edits (parley-diff--edits (parley-diff--lines old) (parley-diff--lines new))))
    (cons (cl-count 'insert edits :key #'car)
          (cl-count 'delete edits :key #'car))))

(defun parley-diff-items (content)
  "Return the ACP `diff' items of the tool call CONTENT (a list or vector)."
  (cl-remove-if-not (lambda (item) (equal (plist-get item :type) "diff"))
                    (append content nil)))

(defun parley-diff-path (item root)
  "Return the path of the diff ITEM to show: relative to ROOT when inside it."
  (let ((path (or (plist-get item :path) "file")))
    (if (and root (file-name-absolute-p path)
             (string-prefix-p (file-name-as-directory (expand-file-name root))
                              (expand-file-name path)))
        (file-relative-name path root)
      path)))

(defun parley-diff-buffer (items &optional title root)
  "Return a `diff-mode' buffer holding the diff ITEMS (ACP `diff' content).
TITLE names the buffer; paths are shown relative to ROOT, the
workspace, where `diff-goto-source' finds them.  The caller shows it
\(`parley-windows-show')."
  (unless items (user-error "No diff here"))
  (let ((buffer (get-buffer-create (format "*parley diff: %s*"
                                           (or title (parley-diff-path (car items) root))))))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (when root (setq default-directory (file-name-as-directory root)))
        (dolist (item items)
          (insert (parley-diff-item-string item root)))
        ;; diff-mode fontifies the text itself; the faces above are for
        ;; the transcript.
        (set-text-properties (point-min) (point-max) nil))
      (diff-mode)
      (setq buffer-read-only t)
      (goto-char (point-min)))
    buffer))

(provide 'parley-diff)
;;; parley-diff.el ends here
