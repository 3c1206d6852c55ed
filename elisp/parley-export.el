;;; parley-export.el --- What leaves a Parley transcript: code blocks, Markdown  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; The code blocks of the answers, copied to the kill ring or inserted
;; in another window (C-c C-w, C-c C-i), and the whole conversation
;; exported as Markdown (C-c C-e).  Notices are not answer text: the
;; export shows them in italics, apart from the answers.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'parley-display)
(require 'parley-markdown)
(require 'parley-session)
(require 'parley-transcript)

;;;; Code blocks and export

(defun parley--code-block-here ()
  "Return the code block at point, else the last one, as (LANGUAGE . CODE)."
  (parley--check-buffer)
  (or (parley-markdown-code-at (point))
      (parley-markdown-last-code parley--start parley--output)
      (user-error "No code block in this conversation")))

(defun parley-copy-code-block ()
  "Copy the code of the code block at point, or of the last one, to the kill ring."
  (interactive)
  (let ((block (parley--code-block-here)))
    (kill-new (cdr block))
    (message "Copied %d line%s of %s" (1+ (cl-count ?\n (cdr block)))
             (if (cl-find ?\n (cdr block)) "s" "")
             (if (car block) (if (string-empty-p (car block)) "code" (car block)) "code"))
    (cdr block)))

(defun parley--insert-target ()
  "Return the window to insert code into: the last other one used."
  (or (get-mru-window nil nil t)
      (user-error "No other window to insert the code into")))

(defun parley-insert-code-block (&optional window)
  "Insert the code block at point, or the last one, at point in WINDOW.
WINDOW is by default the window last selected before the chat's."
  (interactive)
  (let* ((code (cdr (parley--code-block-here)))
         (window (or window (parley--insert-target))))
    (with-selected-window window
      ;; Selecting the window selected already does not make its buffer current.
      (with-current-buffer (window-buffer window)
        (barf-if-buffer-read-only)
        (insert code)))
    (message "Inserted the code into %s" (window-buffer window))
    code))

(defun parley--thought-p (section)
  "Return non-nil when SECTION is a thought.
SECTION is the value of a `parley-header' or `parley-body' property."
  (not (and (parley--block-p section) (eq (parley--block-kind section) 'tool))))

(defun parley--export-line (beg end)
  "Return the transcript's line from BEG to END (its newline excluded) as Markdown."
  (let ((text (buffer-substring-no-properties beg end))
        (face (get-text-property beg 'face))
        (header (get-text-property beg 'parley-header))
        (body (get-text-property beg 'parley-body)))
    (cond
     ((string-empty-p text) text)
     ((eq face 'parley-user-header) "## You")
     ((eq face 'parley-agent-header) "## Parley")
     (header
      (let ((text (string-trim (replace-regexp-in-string "\\`[▾▸] " "" text))))
        (cond ((parley--thought-p header) (format "> **%s**" text))
              ((memq (char-after beg) (list parley--arrow-open parley--arrow-closed))
               (format "- **%s**" text))
              (t (format "  %s" text)))))
     ;; A thought's text, as a quote; a tool's input and output are left out.
     (body (and (parley--thought-p body) (concat "> " text)))
     ((memq face '(parley-notice parley-warning)) (format "*%s*" text))
     ((eq face 'parley-error) (format "**%s**" text))
     (t text))))

(defun parley--export-markdown ()
  "Return this buffer's conversation as Markdown."
  (let ((lines nil))
    (save-excursion
      (goto-char parley--start)
      (while (< (point) parley--output)
        (let* ((beg (point))
               (end (min parley--output (line-end-position)))
               (line (parley--export-line beg end)))
          (when line (push line lines))
          (goto-char (min parley--output (1+ end))))))
    (concat "# " (or parley--title "Parley session") "\n\n"
            (format "Session %s%s, exported %s.\n\n" parley--session-id
                    (if parley--model (format " (%s)" parley--model) "")
                    (parley-display-time (current-time)))
            (string-join (nreverse lines) "\n") "\n")))

(defun parley-export (file)
  "Write this conversation as Markdown to FILE, or show it in a buffer.
Interactively, with a prefix argument, or when FILE is nil, the
Markdown goes to the buffer *parley export*, which is returned."
  (interactive
   (progn (parley--check-buffer)
          (list (unless current-prefix-arg
                  (read-file-name "Export the conversation to: " nil nil nil
                                  (concat (replace-regexp-in-string
                                           "[^[:alnum:]_.-]+" "-"
                                           (or parley--title parley--session-id "parley"))
                                          ".md"))))))
  (parley--check-buffer)
  (let ((markdown (parley--export-markdown)))
    (if file
        (progn (with-temp-file file (insert markdown))
               (message "Exported the conversation to %s" file)
               file)
      (let ((buffer (get-buffer-create "*parley export*")))
        (with-current-buffer buffer
          (let ((inhibit-read-only t))
            (erase-buffer)
            (insert markdown))
          (if (fboundp 'markdown-mode) (funcall 'markdown-mode) (text-mode))
          (goto-char (point-min)))
        (when (called-interactively-p 'any) (pop-to-buffer buffer))
        buffer))))

(provide 'parley-export)
;;; parley-export.el ends here
