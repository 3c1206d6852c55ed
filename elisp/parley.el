;;; parley.el --- Chat with the Parley coding agent  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (jsonrpc "1.0.14"))
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
;;   C-c C-m                   send the prompt too (gptel's key)
;;   C-c C-l                   switch the model (the language model)
;;   C-c C-t                   set the tool policy (hybrid, stream, sync)
;;   C-c C-o                   switch the mode (Ask, Accept edits, Plan)
;;   C-c C-j                   attach the session to your Jupyter kernel
;;                             (or back to Parley's own)
;;   C-c C-s                   list the stored sessions and open one
;;   C-c C-b                   add a buffer as context to the next prompt
;;   C-c C-n                   new session for this project
;;   C-c C-q                   go to the permission question Parley waits on
;;   C-c C-d                   show the diff of the edit at point
;;   C-c C-u                   undo the last editing turn (C-u: from the turn at point)
;;   C-c C-y                   redo: undo the last undo
;;   C-c C-r                   send the last prompt again; after a cancelled or
;;                             failed turn, in its place
;;   C-c C-e                   export the conversation as Markdown (C-u: to a buffer)
;;   C-c C-w / C-c C-i         copy / insert in the other window the code block
;;                             at point, or the last one
;;
;; Answers are fontified as Markdown while they stream, without any
;; package: headings, emphasis, `code', lists, links (RET or a click
;; follows them), and fenced code blocks in their language's mode.
;;
;; A permission question appears in the transcript, with the tool and
;; its input (an edit's diff); `y' allows once, `a' (or `!') always,
;; `n' rejects, with point anywhere outside the prompt; `d' shows the
;; diff, with point in the question.  RET never answers it.  Edits land in the buffers visiting the files
;; (`fs/write_text_file'), and the model reads unsaved buffers.
;;
;; From any buffer, `parley-send-region' asks about the region and
;; `parley-add-buffer' adds a buffer to the next prompt's context.
;; `parley-global-mode' binds them, and `parley-goto-question', under
;; `parley-global-prefix' (C-x M-p); `parley-delete-session' deletes a
;; stored session.  A prompt sent while a turn runs is queued.
;; `parley-restart' restarts the server when it died.  A server of
;; another version than this package's is said once.
;;
;; Streaming is O(1) per chunk: text goes in at a marker, nothing of
;; the transcript is rendered again, and the window follows the end
;; only while point is in the prompt.  See README.md for more.
;;
;; The package's files, each requiring only those below it:
;;
;;   parley.el             the entry points (M-x parley, stored
;;                         sessions, a buffer or region as context),
;;                         the chat mode and its buffers
;;   parley-commands.el    the model, the tool policy, the mode,
;;                         undoing a turn, the diff of an edit
;;   parley-export.el      code blocks copied or inserted, Markdown export
;;   parley-header.el      the header line and mode line
;;   parley-kernels.el     attaching a session to the user's Jupyter kernel
;;   parley-input.el       the prompt: send, history, slash commands,
;;                         cancel, retry, context
;;   parley-session.el     a buffer's session: the server's messages
;;                         routed to it, its turns, resuming it
;;   parley-question.el    permission questions, asked inline
;;   parley-messages.el    where an update lands: answers, thoughts,
;;                         prompts, notices
;;   parley-tool-calls.el  tool calls and edits in the transcript
;;   parley-plan.el        the model's plan, below the transcript
;;   parley-usage.el       the usage the server reports
;;   parley-transcript.el  the transcript's blocks: streaming at a
;;                         marker, sections, thoughts, the end of a turn
;;   parley-terminals.el   the terminals the server runs commands in
;;   parley-markdown.el    Markdown fontified line by line as it streams
;;   parley-display.el     the display rules (docs/display.md): tokens,
;;                         cost, context, tool input and result, times
;;   parley-diff.el        the diffs of edits, computed in Lisp
;;   parley-windows.el     where a diff and a terminal are shown
;;   parley-files.el       fs/read_text_file, fs/write_text_file
;;   parley-connection.el  the `parley serve' process and JSON-RPC
;;   parley-tools.el       the Emacs tools offered to the agent

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'project)
(require 'subr-x)
(require 'parley-commands)
(require 'parley-connection)
(require 'parley-display)
(require 'parley-export)
(require 'parley-header)
(require 'parley-input)
(require 'parley-install)
(require 'parley-kernels)
(require 'parley-wire)
(require 'parley-question)
(require 'parley-session)
(require 'parley-tools)
(require 'parley-transcript)
(require 'parley-usage)

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

(defcustom parley-chat-mode-hook nil
  "Hook run when a Parley chat buffer is set up."
  :type 'hook
  :group 'parley)

;;;; From any buffer: `parley-global-mode'

(defvar parley-command-map
  (let ((map (make-sparse-keymap)))
    (define-key map "q" #'parley-goto-question)
    (define-key map "p" #'parley)
    (define-key map "s" #'parley-sessions)
    (define-key map "b" #'parley-add-buffer)
    (define-key map "r" #'parley-send-region)
    map)
  "Parley's commands from any buffer, under `parley-global-prefix'.
`parley-global-mode' binds it; bind it under a key of your own with
\(define-key \=`global-map' (kbd \"C-c p\") parley-command-map).")

(defvar parley-global-mode-map (make-sparse-keymap)
  "Keymap of `parley-global-mode': `parley-command-map' under its prefix.")

(defun parley--set-global-prefix (symbol prefix)
  "Set SYMBOL to PREFIX and bind `parley-command-map' under it.
PREFIX is a key in `kbd' notation, or nil for no key."
  (set-default symbol prefix)
  (setcdr parley-global-mode-map nil)
  (when prefix
    (define-key parley-global-mode-map (kbd prefix) parley-command-map)))

(defcustom parley-global-prefix "C-x M-p"
  "The prefix of `parley-command-map' while `parley-global-mode' is on.
A key in `kbd' notation; nil binds nothing.  The default is unbound
in Emacs and in gptel, and leaves `C-c LETTER' (the user's) and
`C-c C-KEY' (major modes') alone; see README.md.  Under it, `q' goes
to the question Parley waits on, `p' opens the chat, `s' the stored
sessions, `b' adds a buffer and `r' asks about the region."
  :type '(choice (const :tag "No key" nil) (string :tag "Key"))
  :set #'parley--set-global-prefix
  :group 'parley)

;;;###autoload
(define-minor-mode parley-global-mode
  "Bind Parley's commands in every buffer, under `parley-global-prefix'.
With it on, the key that goes to a waiting question works where you
are, and the echo area names it.

\{parley-command-map}"
  :global t
  :keymap parley-global-mode-map
  :group 'parley)

;;;; The mode

(defvar parley-chat-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c C-c") #'parley-send)
    (define-key map (kbd "RET") #'parley-return)
    (define-key map (kbd "M-p") #'parley-previous-input)
    (define-key map (kbd "M-n") #'parley-next-input)
    (define-key map (kbd "C-c C-k") #'parley-cancel)
    (define-key map (kbd "TAB") #'parley-tab)
    ;; C-c C-m (C-c RET) sends, as in gptel, whose users type it.
    (define-key map (kbd "C-c C-m") #'parley-send)
    (define-key map (kbd "C-c C-l") #'parley-set-model)
    (define-key map (kbd "C-c C-t") #'parley-set-tool-policy)
    (define-key map (kbd "C-c C-o") #'parley-set-mode)
    (define-key map (kbd "C-c C-j") #'parley-attach-kernel)
    (define-key map (kbd "C-c C-s") #'parley-sessions)
    (define-key map (kbd "C-c C-b") #'parley-add-buffer)
    (define-key map (kbd "C-c C-n") #'parley-new-session)
    (define-key map (kbd "C-c C-q") #'parley-goto-question)
    (define-key map (kbd "C-c C-d") #'parley-show-diff)
    (define-key map (kbd "C-c C-u") #'parley-undo-turn)
    (define-key map (kbd "C-c C-y") #'parley-redo-turn)
    (define-key map (kbd "C-c C-r") #'parley-retry)
    (define-key map (kbd "C-c C-e") #'parley-export)
    (define-key map (kbd "C-c C-w") #'parley-copy-code-block)
    (define-key map (kbd "C-c C-i") #'parley-insert-code-block)
    ;; Outside the prompt, a waiting question's keys answer it.
    (dolist (key '("y" "n" "N" "!" "a" "A"))
      (define-key map key #'parley-answer-question))
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
  (add-hook 'kill-buffer-hook #'parley--forget-buffer nil t)
  (add-hook 'after-change-functions #'parley--after-change nil t))

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
  (let ((buffer (generate-new-buffer "*parley*")))
    (with-current-buffer buffer
      (parley-chat-mode)
      (setq default-directory (file-name-as-directory cwd)
            parley--cwd cwd
            parley--session-id session-id)
      (parley--name-buffer)
      (when init (funcall init))
      (parley--show-version-notice))
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
                          (parley--roots-params cwd)
                          (and meta (apply #'parley-wire-with-meta meta))))))
    (parley--make-buffer
     cwd (plist-get result :sessionId)
     (lambda ()
       (setq parley--conn conn
             parley--model (or parley-default-model
                               (parley-wire-meta parley--server-info :defaultModel)))
       (parley--session-result result)))))

(defun parley--find-buffer (cwd)
  "Return a live chat buffer whose session is in CWD, or nil."
  (cl-find-if (lambda (b) (equal (buffer-local-value 'parley--cwd b) cwd))
              (parley--chat-buffers)))

;;;###autoload
(defun parley (&optional new)
  "Open the Parley chat buffer of the current project.
Without one, offer to resume the project's last stored session
\(`parley--offer-last-session'), else start a new one.  With a prefix
argument NEW, start a new session in a new buffer, asking nothing."
  (interactive "P")
  (let* ((cwd (parley--project-root))
         (buffer (or (and (not new) (or (parley--find-buffer cwd)
                                        (parley--offer-last-session cwd)))
                     (parley--new-session-buffer cwd))))
    (pop-to-buffer buffer)
    (goto-char (point-max))
    buffer))

(defun parley--offer-last-session (cwd)
  "Offer to resume the last stored session of CWD; return its buffer, or nil.
Nil when CWD has no stored session or the user says no (a new session
then starts)."
  ;; The first page is enough: the newest comes first.
  (let ((last (car (append (plist-get (parley--request (parley--live-connection)
                                                       'session/list (list :cwd cwd))
                                      :sessions)
                           nil))))
    (when (and last
               (y-or-n-p (format "Resume the last session of this project, %s? "
                                 (parley--session-label last))))
      (parley-open-session (plist-get last :sessionId)
                           (or (plist-get last :cwd) cwd)
                           (plist-get last :title)))))

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
      (parley--insert-notice "The Parley server was restarted.")
      (parley--show-version-notice)))
  (message "Parley server restarted"))

;;;; Context

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

;;;; Stored sessions

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

(defun parley--session-label (session)
  "Return the picker's line for the stored SESSION (a plist of `session/list').
Its title, model, turns and cost (`_meta.parley'), and when it was
last used, in local time."
  (let* ((turns (parley-wire-meta session :turns))
         (cost (parley-wire-meta session :cost))
         (date (plist-get session :updatedAt)))
    (string-join
     (delq nil
           (list (replace-regexp-in-string "[[:space:]\n\r\t]+" " "
                                           (or (plist-get session :title) "(untitled)"))
                 (let ((model (parley-wire-meta session :model))) (and (stringp model) model))
                 (and (natnump turns) (format "%d turn%s" turns (if (= turns 1) "" "s")))
                 (and (numberp cost) (parley-display-cost cost))
                 (and (or (numberp date) (stringp date)) (parley-display-time date))))
     "  ")))

(defun parley--session-candidates (sessions)
  "Return an alist of completion strings for SESSIONS, in their order.
One line per session (`parley--session-label'), none left out; two
alike are told apart by the session's id."
  (let ((seen (make-hash-table :test #'equal)))
    (mapcar (lambda (s)
              (let ((label (parley--session-label s)))
                (when (gethash label seen)
                  (setq label (format "%s  [%s]" label (plist-get s :sessionId))))
                (puthash label t seen)
                (cons label s)))
            sessions)))

(defun parley--read-session (prompt all)
  "Read a stored session with PROMPT; return its plist from `session/list'.
The sessions of this project, or of ALL projects, newest first."
  (let* ((conn (parley--live-connection))
         (cwd (parley--project-root))
         (sessions (parley--list-sessions conn (unless all cwd)))
         (candidates (or (parley--session-candidates sessions)
                         (user-error "No stored sessions%s"
                                     (if all "" " for this project"))))
         (choice (completing-read
                  prompt
                  (lambda (string pred action)
                    (if (eq action 'metadata)
                        '(metadata (display-sort-function . identity))
                      (complete-with-action action candidates string pred)))
                  nil t)))
    (cdr (assoc choice candidates))))

;;;###autoload
(defun parley-sessions (&optional all)
  "Choose a stored session of this project and show it again.
With a prefix argument ALL, choose among the sessions of all projects.
Each is one line: title, model, turns, cost and when it was last
used.  `parley-delete-session' deletes one."
  (interactive "P")
  (let ((session (parley--read-session "Parley session: " all)))
    (pop-to-buffer (parley-open-session (plist-get session :sessionId)
                                        (or (plist-get session :cwd) (parley--project-root))
                                        (plist-get session :title)))))

;;;###autoload
(defun parley-delete-session (&optional all)
  "Choose a stored session of this project and delete it, after asking.
With a prefix argument ALL, choose among the sessions of all projects.
A chat buffer showing it is killed first (its session closed)."
  (interactive "P")
  (let* ((session (parley--read-session "Delete Parley session: " all))
         (id (plist-get session :sessionId))
         (label (parley--session-label session)))
    (when (yes-or-no-p (format "Delete the stored session %s? " label))
      (let ((buffer (gethash id parley--sessions)))
        (when (buffer-live-p buffer) (kill-buffer buffer)))
      (parley--request (parley--live-connection) 'session/delete (list :sessionId id))
      (message "Deleted the session %s" label)
      id)))

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
          (when title (parley--set-title title))
          (setq parley--busy t)
          (jsonrpc-async-request
           conn 'session/load
           (append (list :sessionId session-id :cwd cwd :mcpServers [])
                   (parley--roots-params cwd))
           :timeout parley-turn-timeout
           :success-fn
           (lambda (result)
             (parley--with-live-buffer buffer
               (let ((usage (parley-wire-meta result :usage)))
                 (setq parley--busy nil
                       parley--conn conn
                       parley--model (or (parley-wire-meta result :model) parley--model))
                 (parley--session-result result)
                 (when usage
                   (parley--record-usage 'totals usage))
                 (parley--end-turn-state))))
           :error-fn
           (lambda (err)
             (parley--with-live-buffer buffer
               (parley--turn-failed
                (list :message (format "cannot open the session: %s"
                                       (plist-get err :message))))))))
        buffer))))

(provide 'parley)
;;; parley.el ends here
