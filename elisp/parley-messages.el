;;; parley-messages.el --- What the server streams into a Parley transcript  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; Where a `session/update' lands (`parley--update'): the agent's
;; answer, revised in place when the server replaces it; its thoughts,
;; folded when the answer starts; the user's prompts, as sent or as a
;; session's replay; the server's notices (why a turn stopped, a
;; budget), shown once, where they come, at their level, never as
;; answer text; tool calls (parley-tool-calls.el), usage
;; (parley-usage.el) and the plan (parley-plan.el).  parley-session.el routes the updates here.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'parley-plan)
(require 'parley-transcript)
(require 'parley-tool-calls)
(require 'parley-usage)
(require 'parley-wire)

;;;; Prompts

(defun parley--render-prompt (text context)
  "Show the prompt TEXT and the CONTEXT resources in the transcript.
A new turn starts there (`parley--start-turn')."
  (parley--start-turn)
  (setq parley--role nil)               ; every prompt gets its label
  (parley--ensure-role 'user)
  (dolist (block context)
    (parley--emit (parley--props (parley--content-text block) 'face 'parley-notice)))
  (unless (string-empty-p text)
    (parley--emit (parley--props (concat text "\n") 'face 'parley-user-text))))


;;;; The buffer's name and title

(parley--define-buffer-state
  (parley--given-name "The name Parley gave the buffer; nil once the user renamed it."))

(defconst parley--title-width 40
  "The most characters of a session's title in its buffer's name.")

(defun parley--buffer-name (cwd title)
  "Return the name of a chat buffer of CWD whose session has TITLE (or nil).
`*parley: PROJECT*' while untitled, `*parley: PROJECT: TITLE*' once
titled, so that sessions of one project are told apart by name."
  (let ((project (file-name-nondirectory (directory-file-name cwd))))
    (if (and title (not (string-empty-p (string-trim title))))
        (format "*parley: %s: %s*" project
                (truncate-string-to-width
                 (replace-regexp-in-string "[[:space:]\n\r\t]+" " " (string-trim title))
                 parley--title-width nil nil "…"))
      (format "*parley: %s*" project))))

(defun parley--name-buffer ()
  "Name this chat buffer after its project and title, unless the user renamed it.
A name taken by another buffer gets the session's number of that
name: `*parley: proj: session 2*' rather than `*parley: proj*<2>'."
  (when (or (null parley--given-name) (equal parley--given-name (buffer-name)))
    (let* ((base (parley--buffer-name parley--cwd parley--title))
           (name base)
           (n 1))
      (while (let ((other (get-buffer name)))
               (and other (not (eq other (current-buffer)))))
        (setq n (1+ n)
              name (format "%s: session %d*" (substring base 0 -1) n)))
      (rename-buffer name)
      (setq parley--given-name name))))

(defun parley--set-title (title)
  "Set the session's TITLE, for the header line and the buffer's name."
  (setq parley--title title)
  (when parley--cwd (parley--name-buffer))
  (force-mode-line-update))

;;;; Updates

(defun parley--on-message (update)
  "Show the `agent_message_chunk' UPDATE."
  (let* ((text (parley--content-text (plist-get update :content)))
         (id (plist-get update :messageId))
         (replaces (parley-wire-meta update :replaces))
         (old (and replaces (gethash (cons 'message replaces) parley--blocks))))
    (parley--fold-thoughts)
    (cond
     (old
      ;; A revision: the synchronous call's text replaces what streamed.
      (when (parley--block-markdown old)
        (parley-markdown-forget (parley--block-markdown old))
        (setf (parley--block-markdown old) nil))
      (parley--replace old (parley--props text))
      (parley--start-markdown old)
      (unless (eq old parley--tail)
        (parley--finish-markdown old))
      (when id (puthash (cons 'message id) old parley--blocks)))
     ((string-empty-p text))
     ((and parley--tail
           (eq (parley--block-kind parley--tail) 'message)
           (or (null id) (equal id (parley--block-id parley--tail))))
      (parley--extend parley--tail text)
      (parley--advance-markdown parley--tail text))
     (t
      (parley--ensure-role 'agent)
      (let ((block (parley--new-block 'message id)))
        (parley--start-markdown block)
        (parley--append block (parley--props text))
        (parley--advance-markdown block text))))
    ;; A replayed answer cut short by an error: the mark its turn ended
    ;; with.  A turn that stopped otherwise is marked by its replayed
    ;; notice, which follows.
    (when (equal (parley-wire-meta update :stopReason) "failed")
      (parley--insert-notice "Error: the turn failed here" 'parley-error))))

(defun parley--on-thought (update)
  "Show the `agent_thought_chunk' UPDATE."
  (let ((text (parley--content-text (plist-get update :content)))
        (id (plist-get update :messageId)))
    (unless (string-empty-p text)
      ;; A new section ends its header with the body's first character,
      ;; a newline carrying the body's properties, which text inherits.
      (parley--extend (if (and parley--tail
                               (eq (parley--block-kind parley--tail) 'thought)
                               (or (null id) (equal id (parley--block-id parley--tail))))
                          parley--tail
                        (parley--ensure-role 'agent)
                        (parley--start-thought id))
                      text))))

(defun parley--on-user-chunk (update)
  "Show the `user_message_chunk' UPDATE (a replayed prompt)."
  (let ((text (parley--content-text (plist-get update :content)))
        (id (plist-get update :messageId)))
    (unless (string-empty-p text)
      (if (and parley--tail
               (eq (parley--block-kind parley--tail) 'user)
               (or (null id) (equal id (parley--block-id parley--tail))))
          (parley--extend parley--tail text)
        ;; Another prompt (two in a row when a turn failed early): its
        ;; own label.
        (when (eq parley--role 'user)
          (setq parley--role nil))
        (parley--ensure-role 'user)
        (parley--append (parley--new-block 'user id)
                        (parley--props text 'face 'parley-user-text))))))

(defconst parley--notice-faces
  '(("info" . parley-notice) ("warning" . parley-warning) ("error" . parley-error))
  "The face of a notice of each level (`_meta.parley.notice.level').")

(defun parley--notice-face (update)
  "Return the face of the notice chunk UPDATE, by its level.
An unknown level is shown as `info' is."
  (let ((notice (parley-wire-meta update :notice)))
    (or (and (consp notice)
             (cdr (assoc (plist-get notice :level) parley--notice-faces)))
        'parley-notice)))

(defun parley--on-notice (update)
  "Show the notice chunk UPDATE: Parley about the turn, not the answer.
The server's words (why the turn stopped, a budget...), shown once,
where it comes, in the face of its level; never as answer text."
  (let ((text (string-trim-right (parley--content-text (plist-get update :content)))))
    (parley--fold-thoughts)
    (unless (string-empty-p text)
      (parley--insert-notice text (parley--notice-face update)))))

(defun parley--update (update)
  "Show the `session/update' UPDATE in the current chat buffer."
  (pcase (parley-wire-kind update)
    ((and 'message (guard (parley-wire-meta update :notice)))
     (parley--on-notice update))
    ('message (parley--on-message update))
    ('thought (parley--on-thought update))
    ('user (parley--on-user-chunk update))
    ((or 'tool-call 'tool-call-update) (parley--tool-update update))
    ('usage (parley--record-usage 'round update))
    ('plan (parley--plan-update update))
    ('session-info
     (when (stringp (plist-get update :title))
       (parley--set-title (plist-get update :title))))))

(provide 'parley-messages)
;;; parley-messages.el ends here
