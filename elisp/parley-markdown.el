;;; parley-markdown.el --- Markdown fontified as it streams, without markdown-mode  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; An answer's Markdown is fontified while it streams, line by line:
;; each completed line is fontified once, when its newline arrives, and
;; never again, so a chunk costs the same however long the answer is.
;; A state (`parley-markdown--state') remembers where the lines not yet
;; fontified start and whether they are inside a fenced code block.
;;
;; Lines: headings, list items, block quotes, fences.  Inline: `code',
;; **strong**, *emphasis*, [links](url) and <url>s, which are buttons
;; (RET or a click follows them: `browse-url', or the file for a file
;; link).  A fenced code block is fontified with its language's major
;; mode once it is closed (in a temporary buffer, the mode's hooks not
;; run); `parley-markdown-code-at' finds the block at a position.
;;
;; Only Emacs itself is needed: no markdown-mode.

;;; Code:

(require 'button)
(require 'cl-lib)
(require 'subr-x)

(declare-function browse-url "browse-url" (url &rest args))

;;;; Faces

(defgroup parley-markdown nil
  "How Parley shows the Markdown of answers."
  :group 'parley
  :prefix "parley-markdown-")

(defface parley-markdown-heading '((t :inherit (bold font-lock-function-name-face)))
  "Face for a Markdown heading in an answer.")

(defface parley-markdown-code '((t :inherit (fixed-pitch font-lock-constant-face)))
  "Face for `inline code' in an answer.")

(defface parley-markdown-strong '((t :inherit bold))
  "Face for **strong** text in an answer.")

(defface parley-markdown-emphasis '((t :inherit italic))
  "Face for *emphasized* text in an answer.")

(defface parley-markdown-markup '((t :inherit shadow))
  "Face for Markdown punctuation: list bullets, fences, link targets.")

(defface parley-markdown-quote '((t :inherit font-lock-doc-face))
  "Face for a block quote in an answer.")

(defface parley-markdown-link '((t :inherit link))
  "Face for a link in an answer, a button that follows it.")

;;;; Code languages

(defcustom parley-markdown-code-modes
  '(("python" . python-mode) ("py" . python-mode)
    ("elisp" . emacs-lisp-mode) ("emacs-lisp" . emacs-lisp-mode) ("lisp" . lisp-mode)
    ("sh" . sh-mode) ("bash" . sh-mode) ("shell" . sh-mode) ("zsh" . sh-mode)
    ("js" . js-mode) ("javascript" . js-mode) ("json" . js-mode)
    ("ts" . typescript-mode) ("c" . c-mode) ("cpp" . c++-mode) ("c++" . c++-mode)
    ("diff" . diff-mode) ("css" . css-mode) ("html" . mhtml-mode) ("sql" . sql-mode)
    ("ruby" . ruby-mode) ("rust" . rust-mode) ("go" . go-mode) ("java" . java-mode))
  "Major modes that fontify fenced code blocks, by the fence's language.
A language not listed uses the mode LANGUAGE-mode when there is one."
  :type '(alist :key-type string :value-type function))

(defconst parley-markdown--fontify-limit 50000
  "Longest code block fontified: a longer one, left plain, cannot stall Emacs.")

(defun parley-markdown-mode-for (language)
  "Return the major mode for the code LANGUAGE, or nil."
  (when (and language (not (string-empty-p language)))
    (let* ((language (downcase language))
           (mode (or (cdr (assoc language parley-markdown-code-modes))
                     (intern-soft (concat language "-mode")))))
      (and mode (fboundp mode) mode))))

(defvar parley-markdown--mode-buffers nil
  "Alist (MODE . BUFFER): a hidden buffer per major mode that fontifies code.
Setting a mode up costs more than fontifying a block (python-mode:
about 1 ms), so each mode's buffer is made once and reused.")

(defun parley-markdown--mode-buffer (mode)
  "Return the hidden buffer in MODE that fontifies code, made once."
  (let ((buffer (cdr (assq mode parley-markdown--mode-buffers))))
    (unless (buffer-live-p buffer)
      (setq buffer (generate-new-buffer (format " *parley code %s*" mode)))
      (with-current-buffer buffer
        ;; Quietly: python-mode, for one, says how it guessed the indentation.
        (let ((inhibit-message t) (message-log-max nil))
          ;; Its hooks are delayed, and never run.
          (delay-mode-hooks (funcall mode)))
        (setq buffer-undo-list t))
      (setf (alist-get mode parley-markdown--mode-buffers) buffer))
    buffer))

(defun parley-markdown-face-runs (text mode)
  "Return the faces MODE's font lock gives TEXT, as a list of (FROM TO FACE).
FROM and TO are 0-based offsets in TEXT.  MODE runs in a hidden buffer
with its hooks delayed, so they never run."
  (let (runs)
    (with-current-buffer (parley-markdown--mode-buffer mode)
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert text))
      ;; Fontify it all again: the buffer was fontified for other text.
      (setq font-lock-fontified nil)
      (let ((inhibit-message t) (message-log-max nil))
        (font-lock-ensure))
      (let ((pos (point-min)))
        (while (< pos (point-max))
          (let ((next (next-single-property-change pos 'face nil (point-max)))
                (face (get-text-property pos 'face)))
            (when face (push (list (1- pos) (1- next) face) runs))
            (setq pos next)))))
    runs))

;;;; State

(cl-defstruct (parley-markdown--state (:constructor parley-markdown--state-create)
                                      (:copier nil))
  "Where the lines not yet fontified start (POS, a marker), and the open fence.
FENCE is nil outside a code block; inside one, (LANGUAGE . START),
START a marker where the block's fence line starts."
  pos fence)

(defun parley-markdown-start (beg)
  "Return the state of Markdown text starting at BEG, nothing fontified yet."
  (parley-markdown--state-create :pos (copy-marker beg)))

(defun parley-markdown-forget (state)
  "Release the markers of STATE."
  (set-marker (parley-markdown--state-pos state) nil)
  (when (parley-markdown--state-fence state)
    (set-marker (cdr (parley-markdown--state-fence state)) nil)))

(defmacro parley-markdown--writing (&rest body)
  "Run BODY with read-only text writable, no undo recorded, point kept."
  (declare (indent 0) (debug t))
  `(let ((inhibit-read-only t)
         (buffer-undo-list t))
     (with-silent-modifications
       (save-excursion (save-match-data ,@body)))))

(defun parley-markdown-advance (state end)
  "Fontify the lines of STATE completed before END; keep the last partial line.
Call it when the text added before END holds a newline: it looks back
from END only to the last newline."
  (let ((last (save-excursion
                (goto-char end)
                (search-backward "\n" (parley-markdown--state-pos state) t))))
    (when last
      (parley-markdown--lines state (1+ last)))))

(defun parley-markdown-finish (state end)
  "Fontify all of STATE's text up to END, the partial last line and an open fence."
  (parley-markdown--lines state end)
  (let ((fence (parley-markdown--state-fence state)))
    (when fence
      ;; Closed by the end of the answer.
      (parley-markdown--writing
        (parley-markdown--code-block (car fence) (cdr fence)
                                     (min end (progn (goto-char (cdr fence))
                                                     (line-beginning-position 2)))
                                     end end))
      (set-marker (cdr fence) nil)
      (setf (parley-markdown--state-fence state) nil)))
  (parley-markdown-forget state))

(defun parley-markdown--lines (state end)
  "Fontify the lines of STATE from its position to END, and move it there."
  (let ((pos (marker-position (parley-markdown--state-pos state))))
    (when (< pos end)
      (parley-markdown--writing
        (goto-char pos)
        (while (< (point) end)
          (let ((bol (point))
                (eol (min end (line-end-position))))
            (parley-markdown--line state bol eol (and (< eol end) (1+ eol)))
            (goto-char (if (< eol end) (1+ eol) end)))))
      (set-marker (parley-markdown--state-pos state) end))))

(defconst parley-markdown--fence-re "^ \\{0,3\\}\\(```+\\|~~~+\\)[ \t]*\\([^ \t\n`{]*\\)"
  "A fence line: its fence and its language.")

(defun parley-markdown--line (state bol eol next)
  "Fontify the line from BOL to EOL (its newline excluded) of STATE.
NEXT is where the next line starts, nil when the line is not complete."
  (goto-char bol)
  (let ((fence (parley-markdown--state-fence state)))
    (cond
     (fence
      (when (and next (looking-at "^ \\{0,3\\}\\(```+\\|~~~+\\)[ \t]*$"))
        (parley-markdown--code-block (car fence) (cdr fence)
                                     (save-excursion (goto-char (cdr fence))
                                                     (line-beginning-position 2))
                                     bol eol)
        (set-marker (cdr fence) nil)
        (setf (parley-markdown--state-fence state) nil)))
     ((and next (looking-at parley-markdown--fence-re))
      (setf (parley-markdown--state-fence state)
            (cons (match-string-no-properties 2) (copy-marker bol))))
     ((looking-at "^ \\{0,3\\}\\(#\\{1,6\\}\\)[ \t]+")
      (put-text-property bol eol 'face 'parley-markdown-heading)
      (parley-markdown--inline (match-end 0) eol))
     ((looking-at "^ \\{0,3\\}>[ \t]?")
      (put-text-property bol eol 'face 'parley-markdown-quote)
      (parley-markdown--inline (match-end 0) eol))
     ((looking-at "^[ \t]*\\([-*+]\\|[0-9]+[.)]\\)\\([ \t]+\\[[ xX]\\]\\)?[ \t]+")
      (put-text-property (match-beginning 1) (match-end 1) 'face 'parley-markdown-markup)
      (when (match-beginning 2)
        (put-text-property (match-beginning 2) (match-end 2) 'face 'parley-markdown-markup))
      (parley-markdown--inline (match-end 0) eol))
     (t (parley-markdown--inline bol eol)))))

;;;; Inline

(defun parley-markdown--free-p (beg end)
  "Return non-nil when no inline code is between BEG and END."
  (not (text-property-any beg end 'parley-markdown-code t)))

(defun parley-markdown--add-face (beg end face)
  "Add FACE to the text from BEG to END, before the faces it has."
  (add-face-text-property beg end face))

(defun parley-markdown--inline (beg end)
  "Fontify the inline Markdown of one line, from BEG to END."
  ;; Code first: nothing inside it is Markdown.
  (goto-char beg)
  (while (re-search-forward "\\(`+\\)\\([^`\n]\\(?:.*?[^`\n]\\)?\\)\\1" end t)
    (put-text-property (match-beginning 0) (match-end 0) 'parley-markdown-code t)
    (put-text-property (match-beginning 2) (match-end 2) 'face 'parley-markdown-code)
    (put-text-property (match-beginning 0) (match-beginning 2) 'face 'parley-markdown-markup)
    (put-text-property (match-end 2) (match-end 0) 'face 'parley-markdown-markup))
  (pcase-dolist (`(,re . ,face)
                 '(("\\(\\*\\*\\|__\\)\\([^ \t\n*_]\\(?:[^\n]*?[^ \t\n*_]\\)?\\)\\1"
                    . parley-markdown-strong)
                   ("\\(?:^\\|[^*[:alnum:]]\\)\\(\\*\\)\\([^ \t\n*]\\(?:[^*\n]*?[^ \t\n*]\\)?\\)\\*"
                    . parley-markdown-emphasis)
                   ("\\(?:^\\|[^_[:alnum:]]\\)\\(_\\)\\([^ \t\n_]\\(?:[^_\n]*?[^ \t\n_]\\)?\\)_\\(?:[^_[:alnum:]]\\|$\\)"
                    . parley-markdown-emphasis)))
    (goto-char beg)
    (while (re-search-forward re end t)
      (when (parley-markdown--free-p (match-beginning 1) (match-end 2))
        (parley-markdown--add-face (match-beginning 2) (match-end 2) face))
      ;; The closing delimiter may open the next match.
      (goto-char (max (1+ (match-beginning 1)) (1- (match-end 0))))))
  (goto-char beg)
  (while (re-search-forward
          "\\[\\([^]\n]+\\)\\](\\([^) \t\n]+\\)\\(?:[ \t]+\"[^\"\n]*\"\\)?)\\|<\\([a-z]+://[^>\n ]+\\)>\\|\\(https?://[^] \t\n<>()\"'`]*[^] \t\n<>()\"'`.,;:!?]\\)"
          end t)
    (when (parley-markdown--free-p (match-beginning 0) (match-end 0))
      (cond ((match-beginning 1)
             (parley-markdown--link (match-beginning 1) (match-end 1)
                                    (match-string-no-properties 2))
             (put-text-property (match-end 1) (match-end 0) 'face 'parley-markdown-markup))
            ((match-beginning 3)
             (parley-markdown--link (match-beginning 3) (match-end 3)
                                    (match-string-no-properties 3)))
            (t
             (parley-markdown--link (match-beginning 4) (match-end 4)
                                    (match-string-no-properties 4)))))))

;;;; Links

(define-button-type 'parley-markdown-link
  'action #'parley-markdown--follow-button
  'follow-link t
  'face 'parley-markdown-link
  'help-echo "RET or mouse-1: follow this link")

(defun parley-markdown--link (beg end url)
  "Make the text from BEG to END a button that follows URL."
  (make-text-button beg end :type 'parley-markdown-link 'parley-url url
                    'help-echo (format "RET or mouse-1: %s" url)))

(defun parley-markdown--follow-button (button)
  "Follow the link of BUTTON."
  (parley-markdown-follow (button-get button 'parley-url)))

(defun parley-markdown--file (url)
  "Return the file URL names, or nil when it names none."
  (cond ((string-prefix-p "file://" url)
         (url-unhex-string (string-remove-prefix "file://" url)))
        ((string-match-p "\\`[a-z][a-z0-9+.-]*:" url) nil)
        (t (let ((file (expand-file-name (car (split-string url "#")))))
             (and (file-exists-p file) file)))))

(declare-function url-unhex-string "url-util" (str &optional allow-newlines))

(defun parley-markdown-follow (url)
  "Follow URL: open its file for a file link, otherwise `browse-url'."
  (require 'url-util)
  (let ((file (parley-markdown--file url)))
    (if file
        (find-file-other-window file)
      (browse-url url))))

;;;; Code blocks

(defun parley-markdown--code-block (language fence code-beg code-end end)
  "Fontify the code block of LANGUAGE fenced from FENCE to END.
Its code is from CODE-BEG to CODE-END; the whole block gets the
property `parley-code', (LANGUAGE . CODE), for the copy commands."
  (let* ((code-end (max code-beg code-end))
         (code (buffer-substring-no-properties code-beg code-end))
         (mode (parley-markdown-mode-for language))
         (fence-end (save-excursion (goto-char fence) (line-end-position))))
    (put-text-property fence fence-end 'face 'parley-markdown-markup)
    (when (< code-end end)
      (put-text-property code-end end 'face 'parley-markdown-markup))
    (remove-list-of-text-properties code-beg code-end '(face))
    (when (and mode (<= (length code) parley-markdown--fontify-limit))
      (condition-case nil
          (pcase-dolist (`(,from ,to ,face) (parley-markdown-face-runs code mode))
            (put-text-property (+ code-beg from) (+ code-beg to) 'face face))
        (error nil)))                   ; plain text is still the code
    (put-text-property fence end 'parley-code
                       (cons language (string-remove-suffix "\n" code)))))

(defun parley-markdown-code-at (pos)
  "Return the code block at POS as (LANGUAGE . CODE), or nil."
  (or (get-text-property pos 'parley-code)
      (and (> pos (point-min)) (get-text-property (1- pos) 'parley-code))))

(defun parley-markdown-last-code (beg end)
  "Return the last code block between BEG and END as (LANGUAGE . CODE), or nil."
  (let ((pos end) found)
    (while (and (not found) pos (> pos beg))
      (setq found (get-text-property (1- pos) 'parley-code))
      (unless found
        (setq pos (previous-single-property-change pos 'parley-code nil beg))))
    found))

(provide 'parley-markdown)
;;; parley-markdown.el ends here
