;;; parley.el --- Chat with the Parley coding agent  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1"))
;; Keywords: tools, convenience
;; SPDX-License-Identifier: MIT

;; This file is not part of GNU Emacs.

;;; Commentary:

;; A chat buffer for Parley, an AI coding agent that runs as a separate
;; process (`parley serve') and talks JSON-RPC on stdio using the Agent
;; Client Protocol.  The package uses only Emacs itself: the built-in
;; `jsonrpc' library for the connection and `project' for the root.
;;
;; M-x parley opens the chat buffer of the current project.  The
;; transcript is read-only; the prompt below it is ordinary text.
;;
;;   C-c C-c, RET at the end   send the prompt
;;   M-p / M-n                 previous / next prompt from the history
;;   C-c C-k                   cancel the turn
;;   TAB                       fold or unfold the thoughts or tool call at point;
;;                             in the prompt, complete a /command
;;   C-c C-m                   switch the model
;;   C-c C-t                   set the tool policy (hybrid, stream, sync)
;;   C-c C-s                   list the stored sessions and open one
;;   C-c C-b                   add a buffer as context to the next prompt
;;   C-c C-n                   new session for this project
;;   C-c C-q                   go to the permission question Parley waits on
;;   C-c C-d                   show the diff of the edit at point
;;   C-c C-u                   undo the last editing turn (C-u: from the turn at point)
;;   C-c C-r                   send the last prompt again (after a provider error)
;;   C-c C-e                   export the conversation as Markdown (C-u: to a buffer)
;;   C-c C-w / C-c C-i         copy / insert in the other window the code block
;;                             at point, or the last one
;;
;; Answers are fontified as Markdown while they stream, without any
;; package: headings, emphasis, `code', lists, links (RET or a click
;; follows them), and fenced code blocks in their language's mode.
;;
;; A permission question appears in the transcript, with the tool and
;; its input (an edit's diff); `y' allows once, `a' always, `n'
;; rejects, `d' shows the diff, with point in the question.  RET never
;; answers it.  Edits land in the buffers visiting the files
;; (`fs/write_text_file'), and the model reads unsaved buffers.
;;
;; From any buffer, `parley-send-region' asks about the region and
;; `parley-add-buffer' adds a buffer to the next prompt's context.
;; `parley-restart' restarts the server when it died.
;;
;; Streaming is O(1) per chunk: text goes in at a marker, nothing of
;; the transcript is rendered again, and the window follows the end
;; only while point is in the prompt.  See README.md for more.
;;
;; The package's files, each requiring only those below it:
;;
;;   parley.el             the chat mode, its commands and options
;;   parley-session.el     a buffer's session: the server's messages
;;                         routed to it, its turns, resuming it
;;   parley-question.el    permission questions, asked inline
;;   parley-transcript.el  the transcript: chunks, thoughts, tool
;;                         calls, edits, notices, usage
;;   parley-markdown.el    Markdown fontified line by line as it streams
;;   parley-display.el     the display rules (docs/display.md): tokens,
;;                         cost, context, stop texts, tool input, times
;;   parley-diff.el        the diffs of edits, computed in Lisp
;;   parley-files.el       fs/read_text_file, fs/write_text_file
;;   parley-connection.el  the `parley serve' process and JSON-RPC
;;   parley-tools.el       the Emacs tools offered to the agent

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'project)
(require 'subr-x)
(require 'url-util)
(require 'parley-connection)
(require 'parley-display)
(require 'parley-markdown)
(require 'parley-question)
(require 'parley-session)
(require 'parley-tools)
(require 'parley-transcript)

;;;; Customization

(defcustom parley-default-model nil
  "The model new sessions use, as PROVIDER:MODEL; nil means the server's."
  :type '(choice (const :tag "The server's default" nil) string)
  :group 'parley)

(defcustom parley-tool-policy nil
  "How the server handles tool calls in new sessions; nil means its default."
  :type '(choice (const :tag "The server's default" nil)
                 (const "hybrid") (const "stream") (const "sync"))
  :group 'parley)

(defcustom parley-prompt-string "> "
  "The string shown before the prompt."
  :type 'string
  :group 'parley)

(defcustom parley-context-limit 200000
  "Maximum characters of a buffer or region sent as context."
  :type 'integer
  :group 'parley)

(defcustom parley-chat-mode-hook nil
  "Hook run when a Parley chat buffer is set up."
  :type 'hook
  :group 'parley)

(defface parley-prompt '((t :inherit minibuffer-prompt))
  "Face for the prompt string."
  :group 'parley)

;;;; Chat buffer state

(parley--define-buffer-state
  (parley--input "Marker at the start of the user's input.")
  (parley--history "The prompts sent from this buffer, newest first.")
  (parley--history-pos "Index in `parley--history' of the prompt shown, or nil.")
  (parley--history-saved "The input that was there before browsing the history.")
  (parley--context "Resource blocks to send with the next prompt, in order."))

;;;; Input

(defun parley--current-input ()
  "Return the text of the prompt."
  (buffer-substring-no-properties parley--input (point-max)))

(defun parley--set-input (text)
  "Replace the prompt with TEXT."
  (delete-region parley--input (point-max))
  (goto-char (point-max))
  (insert text))

(defun parley--check-buffer ()
  "Signal an error unless this is a Parley chat buffer."
  (unless (derived-mode-p 'parley-chat-mode)
    (user-error "Not a Parley chat buffer")))

(defun parley-send ()
  "Send the prompt to the agent."
  (interactive)
  (parley--check-buffer)
  (when parley--questions
    (user-error (substitute-command-keys "Parley waits for your answer to its question \
\\<parley-chat-mode-map>(\\[parley-goto-question] goes there)")))
  (when parley--busy
    (user-error "Parley is still answering (C-c C-k cancels)"))
  (let ((text (string-trim (parley--current-input)))
        (context parley--context))
    (when (and (string-empty-p text) (null context))
      (user-error "Nothing to send"))
    (unless (string-empty-p text)
      (push text parley--history))
    (setq parley--history-pos nil
          parley--context nil)
    (delete-region parley--input (point-max))
    (parley--render-prompt text context)
    (parley--prompt (append context
                            (unless (string-empty-p text)
                              (list (list :type "text" :text text)))))))

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

;;;; Slash commands

(defun parley--command-name (command)
  "Return the name of the slash COMMAND (a plist), without its slash."
  (string-remove-prefix "/" (or (plist-get command :name) "")))

(defun parley--command-completion ()
  "Complete the slash command at point, at the start of the prompt.
A function of `completion-at-point-functions': the names of the
commands the server offers (`available_commands_update'), each with
its description and the hint for its input."
  (when (and parley--commands parley--input (>= (point) parley--input)
             (eq (char-after parley--input) ?/))
    (let ((beg (1+ parley--input))
          (end (save-excursion
                 (goto-char (1+ parley--input))
                 (skip-chars-forward "^ \t\n")
                 (point)))
          (commands parley--commands))
      (when (<= beg (point) end)
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
                            "")))))))))

(defun parley-cancel ()
  "Cancel the turn in progress."
  (interactive)
  (parley--check-buffer)
  (if (not (and parley--busy parley--conn (jsonrpc-running-p parley--conn)))
      (message "Nothing to cancel")
    (jsonrpc-notify parley--conn 'session/cancel (list :sessionId parley--session-id))
    (message "Cancelling…")))

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

(defun parley-show-diff ()
  "Show the diff of the edit at point (a question or a tool call) in `diff-mode'."
  (interactive)
  (parley--check-buffer)
  (let* ((question (parley--question-at (point)))
         (section (parley--section-at (point)))
         (diffs (cond (question (parley--question-diffs question))
                      ((parley--block-p section) (parley--block-diffs section)))))
    (unless diffs (user-error "No edit at point"))
    (parley-diff-show diffs (if question
                                (parley--question-title question)
                              (parley--block-title section))
                      parley--cwd)))

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

;;;; Header line and mode line

(defun parley--status ()
  "Return what the session is doing, as (GLYPH WORDS FACE); nil when idle."
  (cond (parley--questions
         (list "●" (substitute-command-keys
                    "waiting for you: \\<parley-chat-mode-map>\\[parley-goto-question] \
goes to the question")
               'warning))
        (parley--busy (list "●" "working" 'warning))
        ((not (and parley--conn (jsonrpc-running-p parley--conn)))
         (list "○" "not connected" 'shadow))))

(defun parley--header-line ()
  "Return the header line of a chat buffer.
The status comes first, so that a narrow window still shows it."
  (let* ((u (or parley--usage (parley--usage-create)))
         (cost (parley--usage-cost u))
         (turns (parley--usage-turns u))
         (status (parley--status)))
    (concat
     " "
     (if status
         (concat (propertize (concat (nth 0 status) " " (nth 1 status)) 'face (nth 2 status))
                 "  ")
       "")
     (propertize "Parley" 'face 'bold)
     " " (or parley--model "default model")
     (format "  tokens %s in / %s out" (parley-display-tokens (parley--usage-in u))
             (parley-display-tokens (parley--usage-out u)))
     (if (numberp cost) (concat "  " (parley-display-cost cost)) "")
     (if turns (format "  %d turn%s" turns (if (= turns 1) "" "s")) "")
     (if (parley--usage-used u)
         (concat "  " (parley-display-context (parley--usage-used u) (parley--usage-size u)))
       "")
     (if parley--context (format "  +%d context" (length parley--context)) "")
     (if parley--title (concat "  " (propertize parley--title 'face 'italic)) ""))))

(defun parley--mode-line-status ()
  "Return the status for the mode line, after the mode's name."
  (pcase (parley--status)
    ('nil "")
    (`(,glyph ,_ ,face)
     (propertize (concat " " glyph (cond (parley--questions "waiting")
                                         (parley--busy "working")
                                         (t "off")))
                 'face face))))

(put 'parley--mode-line-status 'risky-local-variable t)

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

(defun parley-retry ()
  "Send the last prompt again, as it was sent (its context included)."
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
         (context (cl-remove-if (lambda (b) (equal (plist-get b :type) "text")) blocks)))
    (parley--render-prompt text context)
    (parley--prompt blocks)))

;;;; The mode

(defvar parley-chat-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c C-c") #'parley-send)
    (define-key map (kbd "RET") #'parley-return)
    (define-key map (kbd "M-p") #'parley-previous-input)
    (define-key map (kbd "M-n") #'parley-next-input)
    (define-key map (kbd "C-c C-k") #'parley-cancel)
    (define-key map (kbd "TAB") #'parley-tab)
    (define-key map (kbd "C-c C-m") #'parley-set-model)
    (define-key map (kbd "C-c C-t") #'parley-set-tool-policy)
    (define-key map (kbd "C-c C-s") #'parley-sessions)
    (define-key map (kbd "C-c C-b") #'parley-add-buffer)
    (define-key map (kbd "C-c C-n") #'parley-new-session)
    (define-key map (kbd "C-c C-q") #'parley-goto-question)
    (define-key map (kbd "C-c C-d") #'parley-show-diff)
    (define-key map (kbd "C-c C-u") #'parley-undo-turn)
    (define-key map (kbd "C-c C-r") #'parley-retry)
    (define-key map (kbd "C-c C-e") #'parley-export)
    (define-key map (kbd "C-c C-w") #'parley-copy-code-block)
    (define-key map (kbd "C-c C-i") #'parley-insert-code-block)
    map)
  "Keymap of `parley-chat-mode'.")

(define-derived-mode parley-chat-mode text-mode "Parley"
  "Major mode of Parley chat buffers.
The transcript is read-only; type your prompt below it.

\\{parley-chat-mode-map}"
  :group 'parley
  (setq-local header-line-format '(:eval (parley--header-line)))
  (setq mode-name '("Parley" (:eval (parley--mode-line-status))))
  (setq-local parley--blocks (make-hash-table :test #'equal))
  (setq-local parley--approvals (make-hash-table :test #'equal))
  (add-to-invisibility-spec '(parley-hidden . t))
  (add-hook 'completion-at-point-functions #'parley--command-completion nil t)
  (setq-local truncate-lines nil)
  (setq-local word-wrap t)
  (let ((inhibit-read-only t))
    (erase-buffer)
    ;; Transcript text is read-only and rear-sticky, which stops typing
    ;; anywhere in it but at its very start: the banner guards that.
    ;; Nothing else is front-sticky, so that streamed text can join the
    ;; text-property interval before it (see `parley--extend').
    (insert (propertize (substitute-command-keys
                         "Parley  \\<parley-chat-mode-map>\\[parley-send] send  \\[parley-cancel] cancel  \\[parley-tab] fold  \\[parley-previous-input] history\n")
                        'read-only t 'front-sticky '(read-only) 'face 'parley-notice))
    (let ((end-of-transcript (point)))
      (setq parley--start end-of-transcript)
      (insert (propertize "\n" 'read-only t)
              ;; A field: C-a in the input stops after it.
              (propertize parley-prompt-string 'face 'parley-prompt 'field 'parley-prompt
                          'read-only t 'rear-nonsticky t))
      (setq parley--input (point-marker))
      ;; Made after the prompt is in, which it would otherwise precede.
      (setq parley--output (copy-marker end-of-transcript t)))
    (set-buffer-modified-p nil))
  (setq buffer-undo-list nil)
  (add-hook 'kill-buffer-hook #'parley--forget-buffer nil t))

(defun parley--forget-buffer ()
  "Cancel the turn of the buffer being killed; close and unregister its session.
The cancel goes first, so that the server, told next that a pending
question was cancelled, does not go on with the turn.  The session is
closed (`session/close') where the server can: it frees the session's
kernel and memory, and the session stays stored."
  ;; Nothing here may keep the buffer from dying.
  (condition-case err
      (let ((live (and parley--conn (jsonrpc-running-p parley--conn))))
        (when (and parley--busy live)
          (jsonrpc-notify parley--conn 'session/cancel
                          (list :sessionId parley--session-id)))
        (parley--cancel-questions)
        (when (and live parley--session-id
                   ;; The capabilities are those of the server running now.
                   (eq parley--conn parley--connection)
                   (parley--server-supports :close))
          (jsonrpc-async-request parley--conn 'session/close
                                 (list :sessionId parley--session-id)
                                 :timeout parley-request-timeout
                                 :success-fn #'ignore :error-fn #'ignore
                                 :timeout-fn #'ignore)))
    (error (message "Parley: %s" (error-message-string err))))
  (when (and parley--session-id
             (eq (gethash parley--session-id parley--sessions) (current-buffer)))
    (remhash parley--session-id parley--sessions)))

(defun parley--project-root (&optional directory)
  "Return the project root of DIRECTORY (default `default-directory')."
  (let* ((directory (or directory default-directory))
         (project (project-current nil directory)))
    (directory-file-name
     (expand-file-name (if project (project-root project) directory)))))

(defun parley--make-buffer (cwd session-id &optional init)
  "Return a new chat buffer for SESSION-ID in CWD.
INIT, when non-nil, is called in the buffer before the updates that
came for the session before it are applied."
  (let ((buffer (generate-new-buffer
                 (format "*parley: %s*" (file-name-nondirectory cwd)))))
    (with-current-buffer buffer
      (parley-chat-mode)
      (setq default-directory (file-name-as-directory cwd)
            parley--cwd cwd
            parley--session-id session-id)
      (when init (funcall init)))
    (parley--register-session session-id buffer)
    buffer))

(defun parley--new-session-buffer (cwd)
  "Start a session in CWD and return its new chat buffer."
  (let* ((conn (parley--live-connection))
         (meta (append (and parley-default-model (list :model parley-default-model))
                       (and parley-tool-policy (list :toolPolicy parley-tool-policy))))
         ;; The session's slash commands follow the answer: they are
         ;; kept until its buffer is made (`parley--early-updates').
         (result (parley--request
                  conn 'session/new
                  (append (list :cwd cwd :mcpServers [])
                          (and meta (list :_meta (list :parley meta)))))))
    (parley--make-buffer
     cwd (plist-get result :sessionId)
     (lambda ()
       (setq parley--conn conn
             parley--model (or parley-default-model
                               (parley--meta parley--server-info :defaultModel)))
       (parley--session-result result)))))

(defun parley--find-buffer (cwd)
  "Return a live chat buffer whose session is in CWD, or nil."
  (cl-find-if (lambda (b) (equal (buffer-local-value 'parley--cwd b) cwd))
              (parley--chat-buffers)))

;;;###autoload
(defun parley (&optional new)
  "Open the Parley chat buffer of the current project.
With a prefix argument NEW, start a new session in a new buffer."
  (interactive "P")
  (let* ((cwd (parley--project-root))
         (buffer (or (and (not new) (parley--find-buffer cwd))
                     (parley--new-session-buffer cwd))))
    (pop-to-buffer buffer)
    (goto-char (point-max))
    buffer))

(defun parley-new-session ()
  "Start a new session for the current project in a new buffer."
  (interactive)
  (parley t))

(defun parley--chat-buffer-for-current ()
  "Return the chat buffer to send the current buffer's context to."
  (if (derived-mode-p 'parley-chat-mode)
      (current-buffer)
    (let ((cwd (parley--project-root)))
      (or (parley--find-buffer cwd) (parley--new-session-buffer cwd)))))

(defun parley-restart ()
  "Restart the Parley server; the chat buffers continue their sessions."
  (interactive)
  (parley-shutdown)
  (parley--live-connection)
  (dolist (buffer (parley--chat-buffers))
    (with-current-buffer buffer
      (setq parley--busy nil)
      (parley--insert-notice "The Parley server was restarted.")))
  (message "Parley server restarted"))

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

;;;###autoload
(defun parley-add-buffer (buffer)
  "Add the text of BUFFER as context to the next prompt."
  (interactive (list (read-buffer "Add buffer to Parley's context: "
                                  (unless (derived-mode-p 'parley-chat-mode)
                                    (current-buffer))
                                  t)))
  (let ((resource (parley--resource (get-buffer buffer)))
        (chat (parley--chat-buffer-for-current)))
    (with-current-buffer chat
      (setq parley--context (append parley--context (list resource)))
      (force-mode-line-update))
    (unless (eq chat (current-buffer)) (pop-to-buffer chat))
    (message "Added %s to the next prompt's context" buffer)))

;;;###autoload
(defun parley-send-region (beg end question)
  "Ask QUESTION about the region from BEG to END, sent as a resource."
  (interactive
   (if (use-region-p)
       (list (region-beginning) (region-end)
             (read-string "Ask Parley about the region: "))
     (user-error "The region is not active")))
  (let ((resource (parley--resource (current-buffer) beg end))
        (chat (parley--chat-buffer-for-current)))
    (pop-to-buffer chat)
    (if parley--busy
        (progn (setq parley--context (append parley--context (list resource)))
               (message "Parley is busy; the region goes with the next prompt"))
      (let ((text (string-trim question))
            (context (append parley--context (list resource))))
        (setq parley--context nil)
        (unless (string-empty-p text) (push text parley--history))
        (parley--render-prompt text context)
        (parley--prompt (append context
                                (unless (string-empty-p text)
                                  (list (list :type "text" :text text)))))))))

;;;; Sessions and models

(defun parley--list-sessions (conn cwd)
  "Return the stored sessions (in CWD when non-nil) from CONN, newest first."
  (let (sessions cursor (pages 0))
    (while (progn
             (let ((result (parley--request
                            conn 'session/list
                            (append (and cwd (list :cwd cwd))
                                    (and cursor (list :cursor cursor))))))
               (setq sessions (append sessions (append (plist-get result :sessions) nil))
                     cursor (plist-get result :nextCursor)
                     pages (1+ pages)))
             (and cursor (< pages 50))))
    sessions))

(defun parley--session-candidates (sessions)
  "Return an alist of completion strings for SESSIONS, in their order."
  (let ((seen (make-hash-table :test #'equal)))
    (mapcar (lambda (s)
              (let* ((title (or (plist-get s :title) "(untitled)"))
                     (date (let ((d (plist-get s :updatedAt)))
                             (if (or (numberp d) (stringp d)) (parley-display-time d) "")))
                     (label (format "%s  %s" title date)))
                (when (gethash label seen)
                  (setq label (format "%s  [%s]" label (plist-get s :sessionId))))
                (puthash label t seen)
                (cons label s)))
            sessions)))

;;;###autoload
(defun parley-sessions (&optional all)
  "Choose a stored session of this project and show it again.
With a prefix argument ALL, choose among the sessions of all projects."
  (interactive "P")
  (let* ((conn (parley--live-connection))
         (cwd (parley--project-root))
         (sessions (parley--list-sessions conn (unless all cwd)))
         (candidates (or (parley--session-candidates sessions)
                         (user-error "No stored sessions%s"
                                     (if all "" " for this project"))))
         (choice (completing-read
                  "Parley session: "
                  (lambda (string pred action)
                    (if (eq action 'metadata)
                        '(metadata (display-sort-function . identity))
                      (complete-with-action action candidates string pred)))
                  nil t))
         (session (cdr (assoc choice candidates))))
    (pop-to-buffer (parley-open-session (plist-get session :sessionId)
                                        (or (plist-get session :cwd) cwd)
                                        (plist-get session :title)))))

(defun parley-open-session (session-id cwd &optional title)
  "Show the stored session SESSION-ID of CWD (its TITLE) in a chat buffer.
The server replays the conversation into the buffer; the session then
takes prompts as before.  Return the buffer."
  (let ((existing (gethash session-id parley--sessions)))
    (if (buffer-live-p existing)
        existing
      (let* ((conn (parley--live-connection))
             (buffer (parley--make-buffer cwd session-id)))
        (with-current-buffer buffer
          (setq parley--title title
                parley--busy t)
          (jsonrpc-async-request
           conn 'session/load
           (list :sessionId session-id :cwd cwd :mcpServers [])
           :timeout parley-turn-timeout
           :success-fn
           (lambda (result)
             (parley--with-live-buffer buffer
               (let ((meta (plist-get (plist-get result :_meta) :parley)))
                 (setq parley--busy nil
                       parley--conn conn
                       parley--model (or (plist-get meta :model) parley--model))
                 (parley--session-result result)
                 (when (plist-get meta :usage)
                   (parley--record-usage 'totals (plist-get meta :usage)))
                 (parley--end-turn-state))))
           :error-fn
           (lambda (err)
             (parley--with-live-buffer buffer
               (parley--turn-failed
                (list :message (format "cannot open the session: %s"
                                       (plist-get err :message))))))))
        buffer))))

;;;; Settings: the model, the tool policy

(defun parley--read-choice (prompt choices default)
  "Read one of CHOICES with PROMPT, offering DEFAULT.
CHOICES is an alist (VALUE . PLIST); a choice's :description (or, for
a model, why it is unavailable) is shown beside it."
  (completing-read
   prompt
   (lambda (string pred action)
     (if (eq action 'metadata)
         `(metadata
           (annotation-function
            . ,(lambda (value)
                 (let ((choice (cdr (assoc value choices))))
                   (cond ((eq (plist-get choice :available) :json-false)
                          (format "  unavailable: %s" (or (plist-get choice :reason) "?")))
                         ((stringp (plist-get choice :description))
                          (concat "  " (plist-get choice :description)))
                         (t ""))))))
       (complete-with-action action choices string pred)))
   nil nil nil nil default))

(defun parley--apply-setting (option value legacy what)
  "Set this session's config OPTION to VALUE, naming it WHAT in messages.
With OPTION nil (a server without config options), LEGACY are the
params of `_parley/session/configure' that set it instead.  The
change takes effect from the next round."
  (let ((buffer (current-buffer)))
    (parley--with-session
     (lambda (conn)
       (jsonrpc-async-request
        conn (if option 'session/set_config_option '_parley/session/configure)
        (if option
            (list :sessionId parley--session-id :configId (plist-get option :id)
                  :value value)
          (cons :sessionId (cons parley--session-id legacy)))
        :timeout parley-request-timeout
        :success-fn (lambda (result)
                      (parley--with-live-buffer buffer
                        (cond ((plist-get result :configOptions)
                               (parley--set-config-options (plist-get result :configOptions)))
                              ((plist-get legacy :model)
                               (setq parley--model value)
                               (force-mode-line-update)))
                        (message "Parley: the %s is now %s" what value)))
        :error-fn (lambda (err)
                    (message "Parley cannot set the %s to %s: %s" what value
                             (plist-get err :message))))))))

;;;###autoload
(defun parley-set-model (model)
  "Switch this chat buffer's session to MODEL (PROVIDER:MODEL).
The server's config option of category `model' offers the models;
a server without config options is asked for its models instead."
  (interactive
   (progn
     (parley--check-buffer)
     (let ((option (parley--config-option :category "model")))
       (list
        (if option
            (parley--read-choice (format "Model (now %s): " (or parley--model "default"))
                                 (parley--config-choices option)
                                 (plist-get option :currentValue))
          (let ((result (parley--request (parley--live-connection) '_parley/models
                                         (make-hash-table))))
            (parley--read-choice (format "Model (now %s): " (or parley--model "default"))
                                 (mapcar (lambda (m) (cons (plist-get m :id) m))
                                         (plist-get result :models))
                                 (plist-get result :defaultModel))))))))
  (parley--check-buffer)
  (parley--apply-setting (parley--config-option :category "model") model
                         (list :model model) "model"))

(defconst parley--tool-policies '("hybrid" "stream" "sync")
  "The tool policies of a server without config options.")

(defun parley-set-tool-policy (policy)
  "Set the tool policy of this chat buffer's session to POLICY.
`hybrid' streams each round and makes a synchronous call when the
model turns to tools; `stream' assembles the calls from the stream;
`sync' streams nothing.  The server's config option `tool_policy'
offers the policies, where it has one."
  (interactive
   (progn
     (parley--check-buffer)
     (let ((option (parley--config-option :id "tool_policy")))
       (list (parley--read-choice
              "Tool policy: "
              (if option
                  (parley--config-choices option)
                (mapcar #'list parley--tool-policies))
              (plist-get option :currentValue))))))
  (parley--check-buffer)
  (parley--apply-setting (parley--config-option :id "tool_policy") policy
                         (list :toolPolicy policy) "tool policy"))

(provide 'parley)
;;; parley.el ends here
