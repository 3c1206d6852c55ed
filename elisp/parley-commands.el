;;; parley-commands.el --- A Parley chat buffer's session commands  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; What a chat buffer's session can be told besides a prompt: its
;; model (C-c C-l) and tool policy (C-c C-t), set through the server's
;; config options, its mode (C-c C-o, `session/set_mode'), and undoing an editing turn (C-c C-u) and the undo (C-c C-y); and the diff
;; of the edit at point (C-c C-d).

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'parley-connection)
(require 'parley-diff)
(require 'parley-question)
(require 'parley-session)
(require 'parley-tool-calls)
(require 'parley-transcript)
(require 'parley-windows)

;;;; Edits

(defun parley-show-diff ()
  "Show the diff of the edit at point (a question or a tool call) in `diff-mode'."
  (interactive)
  (parley--check-buffer)
  (let* ((question (parley--question-at (point)))
         (section (parley--section-at (point)))
         (diffs (cond (question (parley--question-diffs question))
                      ((parley--block-p section) (parley--block-diffs section)))))
    (unless diffs (user-error "No edit at point"))
    (let ((buffer (parley-diff-buffer diffs (if question
                                                (parley--question-title question)
                                              (parley--block-title section))
                                      parley--cwd)))
      (parley-windows-show buffer (current-buffer))
      buffer)))

(defun parley-undo-turn (&optional at-point)
  "Put back the files the last editing turn changed, as they were before it.
That is the last turn whose edits this buffer saw and did not undo
yet (the last turn when it saw none), so repeating it goes one
editing turn further back.  With a prefix argument AT-POINT, undo
the turn shown at point, and every later turn's edits with it.  The
conversation stays as it is; the model is told at the next prompt.
Buffers visiting the files are reverted when they hold no unsaved
changes."
  (interactive "P")
  (parley--check-buffer)
  (when (or parley--busy parley--questions)
    (user-error "Parley is answering; undo the turn once it ends"))
  (let ((turn (if at-point
                  (or (parley--turn-at (point)) (user-error "No turn at point"))
                (cond (parley--edited-turns (car parley--edited-turns))
                      ((> parley--turn-count 0) parley--turn-count)
                      (t (user-error "No turn to undo"))))))
    (parley--undo-turn turn)
    (message "Parley: undoing turn %d…" turn)))

(defun parley-redo-turn ()
  "Put back what the last undo took away (redo).
Sent as the `/redo' command, so the transcript shows the server's
report of each file, as it shows `/undo''s, and keeps it."
  (interactive)
  (parley--check-buffer)
  (when (or parley--busy parley--questions)
    (user-error "Parley is answering; redo once the turn ends"))
  (parley--render-prompt "/redo" nil)
  (parley--prompt (list (list :type "text" :text "/redo"))))

;;;; Settings: the model, the tool policy

;; Both are the session's config options (ACP `configOptions'), which
;; the server sends with the session and after each change.

(defun parley--read-choice (prompt option)
  "Read one of the values of the config OPTION with PROMPT.
Its current value is the default; a choice's description is shown
beside it."
  (let ((choices (parley--config-choices option)))
    (completing-read
     prompt
     (lambda (string pred action)
       (if (eq action 'metadata)
           `(metadata
             (annotation-function
              . ,(lambda (value)
                   (let ((description (plist-get (cdr (assoc value choices)) :description)))
                     (if (stringp description) (concat "  " description) "")))))
         (complete-with-action action choices string pred)))
     nil nil nil nil (plist-get option :currentValue))))

(defun parley--setting (key value what)
  "Return the session's config option whose KEY (`:id', `:category') is VALUE.
WHAT names it in the error when the session has none."
  (or (parley--config-option key value)
      (user-error "This session offers no %s to choose" what)))

(defun parley--apply-setting (option value what)
  "Set this session's config OPTION to VALUE, naming it WHAT in messages.
The change takes effect from the next round."
  (let ((buffer (current-buffer)))
    (parley--with-session
     (lambda (conn)
       (jsonrpc-async-request
        conn 'session/set_config_option
        (list :sessionId parley--session-id :configId (plist-get option :id) :value value)
        :timeout parley-request-timeout
        :success-fn (lambda (result)
                      (parley--with-live-buffer buffer
                        (when (plist-get result :configOptions)
                          (parley--set-config-options (plist-get result :configOptions)))
                        (message "Parley: the %s is now %s" what value)))
        :error-fn (lambda (err)
                    (message "Parley cannot set the %s to %s: %s" what value
                             (plist-get err :message))))))))

;;;###autoload
(defun parley-set-model (model)
  "Switch this chat buffer's session to MODEL (PROVIDER:MODEL).
The server's config option of category `model' offers the models."
  (interactive
   (progn
     (parley--check-buffer)
     (list (parley--read-choice (format "Model (now %s): " (or parley--model "default"))
                                (parley--setting :category "model" "model")))))
  (parley--check-buffer)
  (parley--apply-setting (parley--setting :category "model" "model") model "model"))

(defun parley-set-tool-policy (policy)
  "Set the tool policy of this chat buffer's session to POLICY.
`hybrid' streams each round and makes a synchronous call when the
model turns to tools; `stream' assembles the calls from the stream;
`sync' streams nothing.  The server's config option `tool_policy'
offers the policies."
  (interactive
   (progn
     (parley--check-buffer)
     (list (parley--read-choice "Tool policy: "
                                (parley--setting :id "tool_policy" "tool policy")))))
  (parley--check-buffer)
  (parley--apply-setting (parley--setting :id "tool_policy" "tool policy") policy
                         "tool policy"))

(defun parley-set-mode (mode)
  "Switch this chat buffer's session to MODE, a mode id such as `plan'.
Ask: every evaluation, edit and command asks first; Accept edits:
edits apply without a question (still undoable per turn); Plan: the
model only reads and proposes.  The server offers the modes."
  (interactive
   (progn
     (parley--check-buffer)
     (let ((choices (or (parley--mode-choices)
                        (user-error "This session offers no modes to choose"))))
       (list (plist-get (cdr (assoc (completing-read
                                     (format "Mode (now %s): " (or (parley--mode-name) "?"))
                                     (lambda (string pred action)
                                       (if (eq action 'metadata)
                                           `(metadata
                                             (annotation-function
                                              . ,(lambda (name)
                                                   (let ((description
                                                          (plist-get (cdr (assoc name choices))
                                                                     :description)))
                                                     (if (stringp description)
                                                         (concat "  " description)
                                                       "")))))
                                         (complete-with-action action choices string pred)))
                                     nil t)
                                    choices))
                        :id)))))
  (parley--check-buffer)
  (unless (stringp mode) (user-error "No mode chosen"))
  (let ((buffer (current-buffer)))
    (parley--with-session
     (lambda (conn)
       (jsonrpc-async-request
        conn 'session/set_mode
        (list :sessionId parley--session-id :modeId mode)
        :timeout parley-request-timeout
        :success-fn (lambda (_result)
                      (parley--with-live-buffer buffer
                        (setq parley--current-mode mode)
                        (force-mode-line-update)
                        (message "Parley: the mode is now %s" (parley--mode-name))))
        :error-fn (lambda (err)
                    (message "Parley cannot set the mode to %s: %s" mode
                             (plist-get err :message))))))))

(provide 'parley-commands)
;;; parley-commands.el ends here
