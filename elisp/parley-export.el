;;; parley-export.el --- What leaves a Parley transcript: code blocks, Markdown  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; The code blocks of the answers, copied to the kill ring or inserted
;; in another window (C-c C-w, C-c C-i), and the whole conversation
;; exported as Markdown (C-c C-e): the server's export
;; (`_parley/session/export'), the one format of every client, written
;; outside the workspace unless you say where.

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

(defcustom parley-export-directory "~/"
  "The directory `parley-export' offers, and where a relative file name goes.
Outside the workspace by default: an export never lands in the
repository unless you say so."
  :type 'directory
  :group 'parley)

(defun parley--export-markdown ()
  "Return this buffer's session as Markdown, from the server.
`_parley/session/export': the one format of every client, the same
as `parley export' prints."
  (parley--check-buffer)
  (condition-case err
      (let ((result (parley--request (parley--live-connection) '_parley/session/export
                                     (list :sessionId parley--session-id
                                           :format "markdown"))))
        (or (plist-get result :text) (user-error "The server exported no text")))
    (jsonrpc-error
     (user-error "Cannot export this session: %s"
                 (or (alist-get 'jsonrpc-error-message (cddr err))
                     (error-message-string err))))))

(defun parley--export-file-name ()
  "Return the file name to offer for an export: the session's title, as a name."
  (concat (replace-regexp-in-string "[^[:alnum:]_.-]+" "-"
                                    (or parley--title parley--session-id "parley"))
          ".md"))

(defun parley-export (file)
  "Write this conversation as Markdown to FILE, or show it in a buffer.
The Markdown is the server's (`_parley/session/export'), the same
from every client.  FILE, when relative, is in
`parley-export-directory', not the workspace.  Interactively, with a
prefix argument, or when FILE is nil, the Markdown goes to the buffer
*parley export*, which is returned."
  (interactive
   (progn (parley--check-buffer)
          (list (unless current-prefix-arg
                  (let ((directory (file-name-as-directory
                                    (expand-file-name parley-export-directory))))
                    (read-file-name "Export the conversation to: " directory nil nil
                                    (parley--export-file-name)))))))
  (parley--check-buffer)
  (let ((markdown (parley--export-markdown)))
    (if file
        (let ((file (expand-file-name file parley-export-directory)))
          (with-temp-file file (insert markdown))
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
