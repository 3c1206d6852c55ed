;;; parley-windows.el --- Where Parley shows its other buffers  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; A diff (`d', C-c C-d) and a command's terminal are shown beside
;; the chat: never in the chat's window, nor in the window of the file
;; being edited.  The first one splits the chat's window; the next
;; ones reuse that window, Parley's own; `q' (`quit-window') in it
;; deletes it, and the frame is as it was.  This is a `display-buffer'
;; action, `parley-display-beside-chat', which the user can replace:
;; customize it, or give the buffers' names (`*parley diff: …*',
;; `*parley-terminal: …*') an entry in `display-buffer-alist', which
;; `display-buffer' consults first.

;;; Code:

(require 'seq)

(defcustom parley-display-beside-chat
  '(parley-windows-beside-chat (inhibit-same-window . t))
  "The `display-buffer' action of a diff and a terminal Parley shows.
By default (`parley-windows-beside-chat') they go beside the chat
buffer, in a window of Parley's own that they share, and `q' in it
deletes it.  An entry for their names in `display-buffer-alist'
takes precedence over this."
  :type '(cons (choice function (repeat function)) alist)
  :group 'parley)

(defun parley-windows--own (frame)
  "Return the live window of FRAME that Parley made for its buffers, or nil."
  (seq-find (lambda (window) (window-parameter window 'parley-beside-chat))
            (window-list frame 'no-minibuf)))

(defun parley-windows-beside-chat (buffer alist)
  "Display BUFFER beside the chat buffer of ALIST's `parley-chat' entry.
A `display-buffer' action function: in Parley's own window when the
frame has one, else in a window split off the chat's window (below
it, or to its right when it is wide), which `quit-window' deletes.
Nil when the chat is in no window."
  (let* ((chat (cdr (assq 'parley-chat alist)))
         (chat-window (and (buffer-live-p chat) (get-buffer-window chat))))
    (when chat-window
      (let ((own (parley-windows--own (window-frame chat-window))))
        (unless own
          (setq own (split-window chat-window nil
                                  (if (>= (window-total-width chat-window) 160) 'right 'below)))
          (set-window-parameter own 'parley-beside-chat t))
        ;; Recorded as made for this buffer, whichever it showed: `q' deletes it.
        (window--display-buffer buffer own 'window alist)))))

(defun parley-windows-show (buffer chat)
  "Show BUFFER beside the chat buffer CHAT (`parley-display-beside-chat').
Return the window, or nil when none was found."
  (display-buffer buffer (append parley-display-beside-chat
                                 (list (cons 'parley-chat chat)))))

(provide 'parley-windows)
;;; parley-windows.el ends here
