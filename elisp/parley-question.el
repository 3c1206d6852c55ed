;;; parley-question.el --- Permission questions in a Parley chat buffer  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; A permission question is asked inline, at the end of the transcript,
;; never in the minibuffer: a question read there from a timer or a
;; process filter takes the keys the user types for another buffer, and
;; RET would approve the default.  Here the keys that answer it (`y',
;; `a' or `!', `n') are bound in an overlay over the question, and, in
;; the chat buffer, outside the prompt (parley-input.el), where they
;; answer the oldest question; typed in the prompt they are letters,
;; and RET answers nothing.
;;
;; `parley--ask' shows a question and calls back with the answer;
;; parley-session.el asks the server's `session/request_permission'
;; and Emacs's own question before `elisp_eval' through it.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'parley-diff)
(require 'parley-display)
(require 'parley-tool-calls)
(require 'parley-transcript)
(require 'parley-windows)

;;;; Faces

(defface parley-question-header '((t :inherit warning :weight bold))
  "Face for the first line of a permission question."
  :group 'parley)

(defface parley-question-key '((t :inherit help-key-binding))
  "Face for the keys that answer a permission question."
  :group 'parley)

(defface parley-allowed '((t :inherit success))
  "Face for the line an allowed permission question collapses to."
  :group 'parley)

(defface parley-rejected '((t :inherit error))
  "Face for the line a rejected permission question collapses to."
  :group 'parley)

;;;; Questions

(defvar-local parley--questions nil
  "The permission questions waiting for the user's answer, oldest first.")

(defconst parley--choice-keys
  '(("allow_once" "y" "Allowed once" parley-allowed)
    ("allow_always" "a" "Allowed always" parley-allowed)
    ("reject_once" "n" "Rejected" parley-rejected))
  "Option kinds a question offers: (KIND KEY COLLAPSED-LABEL FACE).
A command's question may offer several `allow_always' options, one
per prefix, most specific first: the second one's key is `A'.")

(defun parley--option-key (option options)
  "Return the key that answers with OPTION, one of OPTIONS, or nil if none does."
  (let ((key (nth 1 (assoc (plist-get option :kind) parley--choice-keys))))
    (if (equal key "a")
        (nth (cl-position option (cl-remove "allow_always" options
                                            :key (lambda (o) (plist-get o :kind))
                                            :test-not #'equal))
             '("a" "A"))
      key)))

(cl-defstruct (parley--question (:constructor parley--question-create)
                                (:copier nil))
  "A question waiting for the user's answer in a chat buffer.
TITLE names the tool; OPTIONS are the choices (plists with :optionId,
:name and :kind); ON-ANSWER is called once with the chosen option, or
with nil when the question is cancelled; OVERLAY covers the question
in the transcript and carries its keymap; DIFFS are the ACP `diff'
items of the tool call, the edits asked about."
  title options on-answer overlay diffs)

(defvar parley-question-map
  (let ((map (make-sparse-keymap)))
    (define-key map "y" #'parley-question-allow-once)
    (define-key map "a" #'parley-question-allow-always)
    ;; agent-shell's key for "always".
    (define-key map "!" #'parley-question-allow-always)
    (define-key map "A" #'parley-question-allow-always-broader)
    (define-key map "n" #'parley-question-reject)
    (define-key map "N" #'parley-question-reject-with-note)
    (define-key map "d" #'parley-question-show-diff)
    (define-key map (kbd "RET") #'parley-question-help)
    (define-key map "?" #'parley-question-help)
    (define-key map [mouse-1] #'parley-question-click)
    (define-key map [mouse-2] #'parley-question-click)
    map)
  "Keymap active with point in a permission question.")

(defvar parley--waiting-text nil
  "What the global mode line says while Parley waits for the user, or nil.")

(put 'parley--waiting-text 'risky-local-variable t)

;;;; The text of a question

(defun parley--question-input (title input)
  "Return the INPUT of the tool call TITLE for a question: all of it.
Code is a block in its language, any other input indented JSON
\(docs/display.md, through `parley--input-string')."
  (if input (parley--input-string title input t) ""))

(defun parley--question-choices (options diff)
  "Return the line of clickable choices for OPTIONS, with their keys.
DIFF non-nil says that `d' shows the edit's diff in its own buffer."
  (concat
   (parley--props "  ")
   (mapconcat
    (lambda (option)
      (let ((key (parley--option-key option options))
            (name (parley-display-escape-controls
                   (or (plist-get option :name) (plist-get option :kind)) t)))
        (parley--props (concat (if key
                                   (concat (propertize (format "[%s]" key)
                                                       'face 'parley-question-key)
                                           " ")
                                 "")
                               name)
                       'parley-choice option 'mouse-face 'highlight
                       'help-echo (if key (format "mouse-1 or %s: %s" key name)
                                    (format "mouse-1: %s" name)))))
    (cl-remove-if-not (lambda (o) (assoc (plist-get o :kind) parley--choice-keys))
                      options)
    (parley--props "   "))
   (if diff
       (parley--props (concat "   " (propertize "[d]" 'face 'parley-question-key)
                              " Diff in a buffer"))
     "")
   (parley--props "\n    (press the key anywhere outside the prompt; RET does not answer)\n"
                  'face 'parley-notice)))

(defun parley--question-string (header tool options)
  "Return the transcript text of a question: HEADER, TOOL and OPTIONS.
TOOL is the ACP tool call: its title, kind, rawInput and content."
  (let* ((title (or (plist-get tool :title) "a tool"))
         (diffs (parley-diff-items (plist-get tool :content)))
         (input (plist-get tool :rawInput))
         (mode (parley--code-mode title)))
    (concat
     (parley--props header 'face 'parley-question-header)
     ;; Where it runs, or the files it touches: a command's directory.
     (parley--props (parley--locations-line (plist-get tool :locations)))
     (parley--props "\n")
     ;; An edit is shown by its diff alone: its input would repeat it.
     (if diffs "" (parley--question-input title input))
     (mapconcat (lambda (item) (parley--content-item-string item input mode))
                (plist-get tool :content) "")
     (parley--question-choices options diffs))))

;;;; Asking and answering

(defun parley--ask (header tool options on-answer)
  "Ask the user, in the current chat buffer, about TOOL.
HEADER is the question's first line, TOOL the ACP tool call, OPTIONS
the choices (plists with :optionId, :name and :kind).  ON-ANSWER is
called with the chosen option, or nil if the question is cancelled.
The buffer is displayed, not selected, when no window shows it."
  (parley--ensure-role 'agent)
  (parley--fold-thoughts)
  (parley--close-tail)
  (let* ((beg (marker-position parley--output))
         (end (progn (parley--emit (parley--question-string header tool options))
                     (marker-position parley--output)))
         (overlay (make-overlay beg end nil nil nil))
         (question (parley--question-create
                    :title (or (plist-get tool :title) "a tool")
                    :options options :on-answer on-answer :overlay overlay
                    :diffs (parley-diff-items (plist-get tool :content)))))
    ;; Point at the end of the transcript stays where the question now
    ;; starts; it goes past it, so that a key typed there is no answer.
    (when (= (point) beg) (goto-char end))
    (dolist (window (get-buffer-window-list nil nil t))
      (when (= (window-point window) beg) (set-window-point window end)))
    (overlay-put overlay 'keymap parley-question-map)
    (overlay-put overlay 'parley-question question)
    (setq parley--questions (append parley--questions (list question)))
    (parley--questions-changed)
    (let ((buffer (current-buffer)))
      (unless (get-buffer-window buffer 'visible)
        (ignore-errors (display-buffer buffer '(nil (inhibit-same-window . t)))))
      (message "Parley is waiting for you in %s: %s goes to its question"
               (buffer-name buffer) (parley--goto-question-key)))
    question))

(defun parley--goto-question-key ()
  "Return what takes the user to the question from where the user is.
The key `parley-goto-question' has in the buffer of the selected
window (its local map, its minor modes, `parley-global-mode'), the
shortest one, or
`M-x parley-goto-question' where no key runs it: never a key that
would be undefined there, or do something else."
  (with-current-buffer (window-buffer (selected-window))
    (let ((keys (sort (where-is-internal #'parley-goto-question)
                      (lambda (a b) (< (length a) (length b))))))
      (if keys (key-description (car keys)) "M-x parley-goto-question"))))

(defun parley--settle (question option)
  "Answer QUESTION with OPTION (nil: cancelled) and collapse it to one line."
  (let* ((overlay (parley--question-overlay question))
         (beg (overlay-start overlay))
         (end (overlay-end overlay))
         (choice (assoc (plist-get option :kind) parley--choice-keys)))
    (delete-overlay overlay)
    (setq parley--questions (delq question parley--questions))
    (when (and beg end)
      (parley--writing
        (goto-char end)
        (insert-before-markers
         (parley--props (format "%s: %s\n" (if choice (nth 2 choice) "Cancelled")
                                (parley-display-escape-controls
                                 (parley--question-title question) t))
                        'face (if choice (nth 3 choice) 'parley-notice)))
        (delete-region beg end)))
    (parley--questions-changed)
    (funcall (parley--question-on-answer question) option)))

(defun parley--cancel-questions ()
  "Answer the questions pending in this buffer `cancelled'."
  (dolist (question parley--questions)
    (parley--settle question nil)))

(defun parley--waiting-buffers ()
  "Return the chat buffers that wait for the user's answer."
  (cl-remove-if-not (lambda (b) (buffer-local-value 'parley--questions b))
                    (parley--chat-buffers)))

(defun parley--questions-changed ()
  "Show in the mode lines whether Parley waits for the user."
  (setq mode-line-process
        (and parley--questions (propertize ": waiting for you" 'face 'warning)))
  (let ((waiting (parley--waiting-buffers)))
    (setq parley--waiting-text
          (and waiting
               (propertize " Parley: waiting for you"
                           'face 'warning
                           'help-echo (concat "mouse-1: go to the question in "
                                              (mapconcat #'buffer-name waiting ", "))
                           'local-map (make-mode-line-mouse-map
                                       'mouse-1 #'parley-goto-question))))
    (if waiting
        (unless (memq 'parley--waiting-text global-mode-string)
          ;; A list that starts with a symbol would be a conditional.
          (setq global-mode-string (append (or global-mode-string '(""))
                                           '(parley--waiting-text))))
      (setq global-mode-string (delq 'parley--waiting-text global-mode-string))))
  (force-mode-line-update t))

(defun parley--question-at (pos)
  "Return the question whose text covers POS in this buffer, or nil."
  (cl-some (lambda (overlay) (overlay-get overlay 'parley-question))
           (overlays-at pos)))

(defun parley--answer-with-key (question key)
  "Answer QUESTION with its option whose key is KEY; then go to the prompt."
  (let* ((options (parley--question-options question))
         (option (or (cl-find-if (lambda (o) (equal (parley--option-key o options) key))
                                 options)
                     (user-error "This question does not offer that choice"))))
    (parley--settle question option)
    ;; Back to the prompt, where the window follows the answer.
    (goto-char (point-max))))

(defun parley--answer-at-point (key)
  "Answer the question at point with its option whose key is KEY."
  (parley--answer-with-key (or (and (derived-mode-p 'parley-chat-mode)
                                    (parley--question-at (point)))
                               (user-error "No Parley question at point"))
                           key))

(defun parley-question-allow-once ()
  "Allow the tool call of the question at point, this once."
  (interactive)
  (parley--answer-at-point "y"))

(defun parley-question-allow-always ()
  "Allow the tool of the question at point for the rest of the session.
A command's question offers its prefixes: this allows the first, the
most specific one (`git status' rather than `git')."
  (interactive)
  (parley--answer-at-point "a"))

(defun parley-question-allow-always-broader ()
  "Allow always the second prefix of the command question at point.
That is the broader one (`git' rather than `git status')."
  (interactive)
  (parley--answer-at-point "A"))

(defun parley-question-reject ()
  "Reject the tool call of the question at point."
  (interactive)
  (parley--answer-at-point "n"))

(defun parley--reject-option (options)
  "Return the `reject_once' option of OPTIONS, or nil."
  (cl-find "reject_once" options :key (lambda (o) (plist-get o :kind)) :test #'equal))

(defun parley--reject-with-note (question)
  "Reject QUESTION with a note for the model, read in the minibuffer.
The answer carries it as `:note' (sent as `_meta.parley.note'); the
model reads it in the rejected call's result.  An empty note rejects
without one."
  (let ((reject (or (parley--reject-option (parley--question-options question))
                    (user-error "This question does not offer that choice")))
        (note (string-trim (read-string "Note for the model (why, or what instead): "))))
    (parley--settle question (if (string-empty-p note) reject (append (list :note note) reject)))
    (goto-char (point-max))))

(defun parley-question-reject-with-note ()
  "Reject the tool call of the question at point, with a note for the model.
Such as \"use pathlib instead\": the model reads it with the rejection."
  (interactive)
  (parley--reject-with-note (or (and (derived-mode-p 'parley-chat-mode)
                                     (parley--question-at (point)))
                                (user-error "No Parley question at point"))))

(defun parley-question-help ()
  "Say which keys answer the question at point; answer nothing."
  (interactive)
  (let* ((question (parley--question-at (point)))
         (options (and question (parley--question-options question)))
         (broader (cl-find-if (lambda (o) (equal (parley--option-key o options) "A")) options)))
    (message "Answer with y (allow once), a or ! (allow always)%s, n (reject) or N (reject with a note)%s"
             (if broader (format ", A (%s)" (plist-get broader :name)) "")
             (if (and question (parley--question-diffs question)) "; d shows the diff" ""))))

(defun parley-question-show-diff ()
  "Show the diff of the edit the question at point asks about, in `diff-mode'."
  (interactive)
  (let ((question (or (and (derived-mode-p 'parley-chat-mode)
                           (parley--question-at (point)))
                      (user-error "No Parley question at point"))))
    (parley-windows-show (parley-diff-buffer (parley--question-diffs question)
                                             (parley--question-title question) parley--cwd)
                         (current-buffer))))

(defun parley-question-click (event)
  "Answer the question with the choice clicked on in EVENT."
  (interactive "e")
  (let* ((position (event-end event))
         (pos (posn-point position)))
    (with-current-buffer (window-buffer (posn-window position))
      (let ((option (and pos (get-text-property pos 'parley-choice)))
            (question (and pos (parley--question-at pos))))
        (when (and option question (memq option (parley--question-options question)))
          (parley--settle question option))))))

(defun parley-goto-question ()
  "Show the oldest question Parley waits on, with point in it."
  (interactive)
  (let ((buffer (if (and (derived-mode-p 'parley-chat-mode) parley--questions)
                    (current-buffer)
                  (or (car (parley--waiting-buffers))
                      (user-error "Parley is not waiting for an answer")))))
    (pop-to-buffer buffer)
    (goto-char (overlay-start (parley--question-overlay (car parley--questions))))))

(provide 'parley-question)
;;; parley-question.el ends here
