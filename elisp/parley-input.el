;;; parley-input.el --- The prompt of a Parley chat buffer  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; Below the transcript, the prompt is ordinary text: RET at its end
;; or C-c C-c sends it (with the buffers and regions added as
;; context), M-p / M-n browse the prompts sent, TAB completes a slash
;; command; C-c C-k cancels the turn, C-c C-r sends the last prompt
;; again (in place of the last turn when that was cut off).

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'subr-x)
(require 'url-util)
(require 'parley-messages)
(require 'parley-question)
(require 'parley-session)
(require 'parley-transcript)

;;;; Customization

(defcustom parley-prompt-string "> "
  "The string shown before the prompt."
  :type 'string
  :group 'parley)

(defcustom parley-context-limit 200000
  "Maximum characters of a buffer or region sent as context."
  :type 'integer
  :group 'parley)

(defface parley-prompt '((t :inherit minibuffer-prompt))
  "Face for the prompt string."
  :group 'parley)

(defface parley-queued '((t :inherit shadow :slant italic))
  "Face for a prompt queued while a turn runs."
  :group 'parley)

;;;; Chat buffer state

(parley--define-buffer-state
  (parley--input "Marker at the start of the user's input.")
  (parley--history "The prompts sent from this buffer, newest first.")
  (parley--history-pos "Index in `parley--history' of the prompt shown, or nil.")
  (parley--history-saved "The input that was there before browsing the history.")
  (parley--context "Resource blocks to send with the next prompt, in order.")
  (parley--queued "The overlay over the prompt queued while a turn runs, or nil."))

;;;; Input

(defun parley--current-input ()
  "Return the text of the prompt."
  (buffer-substring-no-properties parley--input (point-max)))

(defun parley--set-input (text)
  "Replace the prompt with TEXT."
  (delete-region parley--input (point-max))
  (goto-char (point-max))
  (insert text))

(defun parley-send ()
  "Send the prompt to the agent.
While a turn runs, the prompt is queued instead: it is sent when the
turn ends (`parley--queue-input')."
  (interactive)
  (parley--check-buffer)
  (when parley--questions
    (user-error (substitute-command-keys "Parley waits for your answer to its question \
\\<parley-chat-mode-map>(\\[parley-goto-question] goes there)")))
  (let ((text (string-trim (parley--current-input)))
        (context parley--context))
    (when (and (string-empty-p text) (null context))
      (user-error "Nothing to send"))
    (if parley--busy
        (progn
          (parley--queue-input)
          (message "%s" (substitute-command-keys "Queued: sent when the turn ends \
\\<parley-chat-mode-map>(\\[parley-cancel] or an edit unqueues it)")))
      (parley--unqueue)
      (unless (string-empty-p text)
        (push text parley--history))
      (setq parley--history-pos nil
            parley--context nil)
      (delete-region parley--input (point-max))
      (parley--render-prompt text context)
      (parley--prompt (append context
                              (unless (string-empty-p text)
                                (list (list :type "text" :text text))))))))

(defun parley-return ()
  "Send the prompt when point is at its end; otherwise insert a newline.
On a section header in the transcript, fold or unfold the section."
  (interactive)
  (cond ((>= (point) parley--input)
         (if (eobp) (parley-send) (newline)))
        ((parley--section-at (point)) (parley-toggle-section))
        (t (goto-char (point-max)))))

(defun parley-tab ()
  "Toggle the section at point, or complete or indent in the prompt.
A slash command being typed at the start of the prompt is completed."
  (interactive)
  (cond ((parley--section-at (point)) (parley-toggle-section))
        ((>= (point) parley--input)
         (if (parley--command-completion)
             (completion-at-point)
           (indent-for-tab-command)))
        (t (parley-next-section))))

;;;; One key answers the question

(defconst parley--answer-keys '(("y" . "y") ("n" . "n") ("!" . "a") ("a" . "a") ("A" . "A") ("N" . "N"))
  "Keys that answer the waiting question from outside the prompt: (KEY . CHOICE).
CHOICE is the question's own key (`parley--option-key'); `!' is
agent-shell's key for \"always\", the same as `a'.")

(defun parley-answer-question ()
  "Answer the waiting question with the key typed, or type it in the prompt.
Outside the prompt (in the transcript), `y' allows the oldest question
Parley waits on once, `n' rejects it, `N' rejects it with a note for
the model, `!' or `a' allows it always, and
`A' allows a command's broader prefix; point need not be in the
question.  In the prompt the key is a letter of it, so typing is never
taken for an answer."
  (interactive)
  (let ((key (and (characterp last-command-event)
                  (cdr (assoc (string last-command-event) parley--answer-keys)))))
    (cond ((or (>= (point) parley--input) (not key))
           (call-interactively #'self-insert-command))
          ((null parley--questions)
           (user-error "Parley is not waiting for an answer"))
          (t (let ((question (or (parley--question-at (point)) (car parley--questions))))
               (if (equal key "N")
                   (parley--reject-with-note question)
                 (parley--answer-with-key question key)))))))

;;;; The queue: a prompt sent while a turn runs

(defun parley--queue-input ()
  "Queue the prompt: shown as pending, it is sent when the turn ends.
The prompt stays where it is, dimmed and marked; an edit of it, or
\[parley-cancel], unqueues it (it stays, unsent)."
  (parley--unqueue)
  (let ((overlay (make-overlay parley--input (point-max) nil nil t)))
    (overlay-put overlay 'face 'parley-queued)
    (overlay-put overlay 'before-string
                 (propertize (substitute-command-keys
                              ;; Doubled backslashes: the key, not its escape.
                              "[queued: sent when the turn ends; \\<parley-chat-mode-map>\
\\[parley-cancel] or an edit unqueues it] ")
                             'face 'parley-notice))
    (setq parley--queued overlay)))

(defun parley--unqueue ()
  "Unqueue the queued prompt, if any: it stays in the prompt, unsent."
  (when parley--queued
    (delete-overlay parley--queued)
    (setq parley--queued nil)))

(defun parley--send-queued (failed)
  "Send the queued prompt, now that the turn ended.
After a turn that FAILED, it is unqueued instead, with a message: it
may no longer be what to say."
  (when parley--queued
    (if failed
        (progn (parley--unqueue)
               (message "The turn failed: your queued prompt was not sent"))
      (parley-send))))

(add-hook 'parley-turn-end-functions #'parley--send-queued)

(defun parley--after-change (beg end _length)
  "Keep the chat buffer unmodified; an edit of a queued prompt unqueues it.
The transcript is not a file: nothing is there to save.  BEG and END
are the changed text's bounds (`after-change-functions')."
  (restore-buffer-modified-p nil)
  (when (and parley--queued parley--input (>= end parley--input)
             (< beg (point-max)))
    (parley--unqueue)
    (message "Unqueued: the prompt will not be sent when the turn ends")))

;;;; Slash commands

(defun parley--command-name (command)
  "Return the name of the slash COMMAND (a plist), without its slash."
  (string-remove-prefix "/" (or (plist-get command :name) "")))

(defun parley--command-completion ()
  "Complete the slash command at point, or its argument, in the prompt.
A function of `completion-at-point-functions': the command's name
\(`parley--command-name-completion'), or the value it takes when it is
named after a config option (`parley--command-argument-completion')."
  (when (and parley--input (>= (point) parley--input)
             (eq (char-after parley--input) ?/))
    (or (parley--command-name-completion)
        (parley--command-argument-completion))))

(defun parley--command-name-completion ()
  "Complete the name of the slash command at point.
The names of the commands the server offers (`available_commands_update'),
each with its description and the hint for its input."
  (let ((beg (1+ parley--input))
        (end (save-excursion
               (goto-char (1+ parley--input))
               (skip-chars-forward "^ \t\n")
               (point)))
        (commands parley--commands))
    (when (and commands (<= beg (point) end))
      (list beg end (mapcar #'parley--command-name commands)
            :exclusive 'no
            :annotation-function
            (lambda (name)
              (let* ((command (cl-find name commands :key #'parley--command-name
                                       :test #'equal))
                     (hint (plist-get (plist-get command :input) :hint)))
                (concat (if (stringp hint) (concat " " hint) "")
                        (if (stringp (plist-get command :description))
                            (concat "  " (plist-get command :description))
                          ""))))))))

(defun parley--command-argument-completion ()
  "Complete the argument of the slash command at point, such as `/mode pl'.
A command named after one of the session's config options (`/mode',
`/model') takes one of its values: those are offered, each with its
name and description, as the server sent them."
  (let ((pos (point)))
    (save-excursion
      (goto-char parley--input)
      (when (looking-at "/\\([^ \t\n]+\\)[ \t]+\\([^ \t\n]*\\)")
        (let* ((beg (match-beginning 2))
               (end (match-end 2))
               (choices (parley--config-choices
                         (parley--config-option :id (match-string-no-properties 1)))))
          (when (and choices (<= beg pos end))
            (list beg end (mapcar #'car choices)
                  :exclusive 'no
                  :annotation-function
                  (lambda (value)
                    (let ((choice (cdr (assoc value choices))))
                      ;; A model's name is its value: not said twice.
                      (mapconcat (lambda (text) (concat "  " text))
                                 (cl-remove-if-not
                                  (lambda (text) (and (stringp text) (not (equal text value))))
                                  (list (plist-get choice :name)
                                        (plist-get choice :description)))
                                 ""))))))))))

;;;; Cancel, history, retry

(defun parley-cancel ()
  "Cancel the turn in progress."
  (interactive)
  (parley--check-buffer)
  (cond
   (parley--queued
    (parley--unqueue)
    (message "%s" (substitute-command-keys "Unqueued: the prompt stays, unsent \
\\<parley-chat-mode-map>(\\[parley-cancel] again cancels the turn)")))
   ((not (and parley--busy parley--conn (jsonrpc-running-p parley--conn)))
    (message "Nothing to cancel"))
   (t
    (jsonrpc-notify parley--conn 'session/cancel (list :sessionId parley--session-id))
    (message "Cancelling…"))))

(defun parley--history-move (n)
  "Show the prompt N places back in the history (forward when N < 0)."
  (parley--check-buffer)
  (unless parley--history (user-error "No prompt history"))
  (let ((pos (+ (or parley--history-pos -1) n)))
    (cond ((>= pos (length parley--history))
           (user-error "Beginning of prompt history"))
          ((< pos 0)
           (when parley--history-pos
             (parley--set-input (or parley--history-saved ""))
             (setq parley--history-pos nil)))
          (t
           (unless parley--history-pos
             (setq parley--history-saved (parley--current-input)))
           (setq parley--history-pos pos)
           (parley--set-input (nth pos parley--history))))))

(defun parley-previous-input (n)
  "Replace the prompt with the previous one from the history; N times."
  (interactive "p")
  (parley--history-move n))

(defun parley-next-input (n)
  "Replace the prompt with the next one from the history; N times."
  (interactive "p")
  (parley--history-move (- n)))

(defun parley-retry ()
  "Send the last prompt again, as it was sent (its context included).
When the last turn was cut off (cancelled, or failed), the retry takes
its place: the turn leaves the transcript, and the server runs the
prompt as that turn (`_meta.parley.retry'), so the conversation has
one prompt and one answer.  After a finished turn it is a new turn.
The prompt being typed stays as it is."
  (interactive)
  (parley--check-buffer)
  (when parley--busy
    (user-error "Parley is still answering (C-c C-k cancels)"))
  (unless parley--last-prompt
    (user-error "No prompt to retry in this buffer"))
  (let* ((blocks parley--last-prompt)
         (text (mapconcat (lambda (b) (if (equal (plist-get b :type) "text")
                                          (plist-get b :text)
                                        ""))
                          blocks ""))
         (context (cl-remove-if (lambda (b) (equal (plist-get b :type) "text")) blocks))
         (cut-off parley--cut-off-turn))
    (when cut-off
      (parley--remove-turn cut-off))
    (parley--render-prompt text context)
    (parley--prompt blocks (and cut-off t))))

;;;; Context

(defun parley--resource (buffer &optional beg end)
  "Return a resource ContentBlock for BUFFER's text from BEG to END."
  (with-current-buffer buffer
    (save-restriction
      (widen)
      (let* ((beg (or beg (point-min)))
             (end (min (or end (point-max)) (+ beg parley-context-limit)))
             (file buffer-file-name)
             (lines (and (or (> beg (point-min)) (< end (point-max)))
                         (format "#L%d-L%d" (line-number-at-pos beg)
                                 (line-number-at-pos end))))
             (uri (concat (if file
                              (concat "file://" (expand-file-name file))
                            (concat "buffer://" (url-hexify-string (buffer-name))))
                          lines)))
        (list :type "resource"
              :resource (list :uri uri
                              :text (buffer-substring-no-properties beg end)
                              :mimeType "text/plain"))))))

(provide 'parley-input)
;;; parley-input.el ends here
