;;; parley-session.el --- A Parley chat buffer's session on the server  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; Each chat buffer holds one session of the server.  This file routes
;; the server's messages to the session's buffer (updates, permission
;; questions, Emacs tool calls, the server's exit), and runs the
;; session's turns: a prompt, its end (done, failed, cancelled) with
;; the session's totals its result carries, and resuming the session,
;; or starting a new one, after the server was restarted.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'subr-x)
(require 'parley-connection)
(require 'parley-display)
(require 'parley-files)
(require 'parley-messages)
(require 'parley-question)
(require 'parley-terminals)
(require 'parley-tools)
(require 'parley-wire)
(require 'parley-tool-calls)
(require 'parley-transcript)
(require 'parley-usage)

;;;; Customization

(defcustom parley-turn-timeout nil
  "Seconds a turn may take before Emacs stops waiting; nil means no limit.
A turn can run for a long time (tools, permission prompts), so it is
not bound by `jsonrpc-default-request-timeout'."
  :type '(choice (const :tag "No limit" nil) number)
  :group 'parley)

;;;; Session state

(defcustom parley-additional-directories nil
  "More workspace roots of a session, beside its project's root.
A list of absolute directories, or a function called with the
project's root that returns one (nil: none).  They are sent as ACP
`additionalDirectories' with each `session/new', `load' and `resume':
the model's file tools and commands may read and write there too."
  :type '(choice (repeat directory) function)
  :group 'parley)

(defun parley--roots-params (cwd)
  "Return the params naming the session's other roots, beside CWD, or nil."
  (let ((roots (if (functionp parley-additional-directories)
                   (funcall parley-additional-directories cwd)
                 parley-additional-directories)))
    (when roots
      (list :additionalDirectories
            (vconcat (cl-remove (file-name-as-directory (expand-file-name cwd))
                                (mapcar (lambda (dir) (directory-file-name (expand-file-name dir)))
                                        roots)
                                :key #'file-name-as-directory :test #'equal))))))

(defvar parley--sessions (make-hash-table :test #'equal)
  "Map a session id to its chat buffer.")

(defvar parley--early-updates (make-hash-table :test #'equal)
  "Session state updates that came before their session's buffer, by session id.
The server follows its answer to `session/new' with the session's
commands at once, while Emacs is still making the buffer.  Only the
last update of each kind is kept.")

(defconst parley--state-updates '(commands config-options mode)
  "The kinds of `session/update' that set the session's state, not its transcript.
Names of `parley-wire-update-kinds'.")

(parley--define-buffer-state
  (parley--session-id "The id of this buffer's session.")
  (parley--conn "The connection on which this buffer's session is active.")
  (parley--busy "Non-nil while a turn or a session load is in progress.")
  (parley--model "The model of this buffer's session, if known.")
  (parley--config-options
   "The session's ACP config options (model, tool policy...), as last sent.")
  (parley--current-mode "The id of the session's mode (`ask', `plan'...), if it has modes.")
  (parley--modes
   "The modes the session offers, a list of plists (:id :name :description).")
  (parley--commands
   "The slash commands the server offers this session (plists: name, description).")
  (parley--approvals "Hash table: toolCallId to `once' or `always', as the user answered.")
  (parley--always-approved "Names of tools the user allowed always in this session.")
  (parley--edited-turns
   "The turns whose edits completed and were not undone, newest first.")
  (parley--last-prompt
   "The ContentBlocks of the last prompt sent, which `parley-retry' sends again."))

;;;; Config options

(defun parley--config-option (key value)
  "Return the session's config option whose KEY (`:id', `:category') is VALUE."
  (cl-find value parley--config-options
           :key (lambda (option) (plist-get option key)) :test #'equal))

(defun parley--config-choices (option)
  "Return the values of the select OPTION, as an alist (VALUE . CHOICE).
CHOICE is the plist with :value, :name and :description; grouped
choices (ACP's `{group, name, options}') are flattened."
  (cl-loop for choice across (or (plist-get option :options) [])
           append (if (plist-member choice :options)
                      (cl-loop for inner across (plist-get choice :options)
                               collect (cons (plist-get inner :value) inner))
                    (list (cons (plist-get choice :value) choice)))))

(defun parley--set-config-options (options)
  "Keep OPTIONS (a vector) as this session's config options.
The model shown is the current value of the option of category `model'."
  (setq parley--config-options (append options nil))
  (let ((model (parley--config-option :category "model"))
        (mode (parley--config-option :category "mode")))
    (when (stringp (plist-get model :currentValue))
      (setq parley--model (plist-get model :currentValue)))
    (when (stringp (plist-get mode :currentValue))
      (setq parley--current-mode (plist-get mode :currentValue))))
  (force-mode-line-update))

;;;; Modes

;; The server offers its modes both ways: as ACP `modes' (with
;; `current_mode_update') and as the config option of category `mode'
;; (with `config_option_update').  Either sets `parley--current-mode'.

(defun parley--set-modes (modes)
  "Keep the ACP MODES (`currentModeId', `availableModes') of the session."
  (setq parley--modes (append (plist-get modes :availableModes) nil))
  (when (stringp (plist-get modes :currentModeId))
    (setq parley--current-mode (plist-get modes :currentModeId)))
  (force-mode-line-update))

(defun parley--mode-choices ()
  "Return the session's modes as an alist (NAME . MODE), MODE a plist (:id :name).
From its ACP modes, or else its config option of category `mode'."
  (mapcar (lambda (mode) (cons (or (plist-get mode :name) (plist-get mode :id)) mode))
          (or parley--modes
              (mapcar (lambda (choice)
                        (list :id (car choice) :name (plist-get (cdr choice) :name)
                              :description (plist-get (cdr choice) :description)))
                      (parley--config-choices (parley--config-option :category "mode"))))))

(defun parley--mode-name ()
  "Return the name of the session's mode, or nil when it has none."
  (when parley--current-mode
    (or (car (cl-find parley--current-mode (parley--mode-choices)
                      :key (lambda (choice) (plist-get (cdr choice) :id)) :test #'equal))
        parley--current-mode)))

(defun parley--session-result (result)
  "Keep the config options and modes of RESULT.
RESULT is the answer to `session/new', `session/load' or `session/resume'."
  (when (plist-get result :configOptions)
    (parley--set-config-options (plist-get result :configOptions)))
  (when (plist-get result :modes)
    (parley--set-modes (plist-get result :modes))))

;;;; Dispatch

(defun parley--handle-notification (_conn method params)
  "Handle the notification METHOD with PARAMS from the server."
  (when (eq method 'session/update)
    (let* ((id (plist-get params :sessionId))
           (update (plist-get params :update))
           (buffer (gethash id parley--sessions)))
      (if (buffer-live-p buffer)
          (with-current-buffer buffer
            (condition-case-unless-debug err
                (parley--session-update update)
              (error (message "Parley: cannot show an update: %s"
                              (error-message-string err)))))
        (let ((kind (parley-wire-kind update)))
          (when (memq kind parley--state-updates)
            (puthash id (cons update (cl-remove kind (gethash id parley--early-updates)
                                                :key #'parley-wire-kind))
                     parley--early-updates)))))))

(defun parley--register-session (id buffer)
  "Make BUFFER the chat buffer of the session ID.
The state updates that came for it before are applied in BUFFER."
  (puthash id buffer parley--sessions)
  (let ((early (gethash id parley--early-updates)))
    (remhash id parley--early-updates)
    (with-current-buffer buffer
      (mapc #'parley--session-update (reverse early)))))

(defun parley--session-update (update)
  "Keep the session state in UPDATE, or show UPDATE in the transcript."
  (pcase (parley-wire-kind update)
    ('config-options
     (parley--set-config-options (plist-get update :configOptions)))
    ('commands
     (setq parley--commands (append (plist-get update :availableCommands) nil)))
    ('mode
     (setq parley--current-mode (plist-get update :currentModeId))
     (force-mode-line-update))
    (_ (parley--update update)
       (parley--after-edit update))))

(defun parley--handle-request (conn method params)
  "Answer the request METHOD with PARAMS from the server on CONN."
  (pcase method
    ('session/request_permission
     (parley--later (lambda (conn id) (parley--ask-permission conn id params))))
    ('_parley/editor/callTool
     (parley--later (lambda (conn id)
                      (run-at-time 0 nil #'parley--call-editor-tool conn id params))))
    ('terminal/create
     (let ((buffer (parley--session-buffer params)))
       (parley-terminals-create conn params (buffer-local-value 'parley--cwd buffer) buffer)))
    ('terminal/output (parley-terminals-output params))
    ('terminal/wait_for_exit (parley-terminals-wait-for-exit params))
    ('terminal/kill (parley-terminals-kill params))
    ('terminal/release (parley-terminals-release params))
    ('fs/read_text_file
     (list :content (parley-files-read (parley--session-file params)
                                       (plist-get params :line)
                                       (plist-get params :limit))))
    ('fs/write_text_file
     ;; Saving runs the user's hooks, which may wait for a process: not
     ;; inside jsonrpc.el's process filter (see `parley--later').
     (let ((file (parley--session-file params))
           (content (plist-get params :content)))
       (unless (stringp content)
         (jsonrpc-error :code -32602 :message "fs/write_text_file needs the content"))
       (parley--later (lambda (conn id)
                        (run-at-time 0 nil #'parley--write-file conn id file content)))))
    (_ (jsonrpc-error :code -32601 :message (format "Unknown method %s" method)))))

(defun parley--on-shutdown (conn)
  "Report in the chat buffers that CONN's server exited."
  (let* ((proc (jsonrpc--process conn))
         (expected (parley--expected-exit conn))
         (text (format "The Parley server exited (%s %s).%s\n\
Run M-x parley-restart to start it again."
                       (process-status proc) (process-exit-status proc)
                       (parley--stderr-tail conn))))
    (parley--stderr-reported conn)
    (parley-terminals-end conn)
    (dolist (buffer (parley--chat-buffers))
      (with-current-buffer buffer
        (when (or (eq parley--conn conn) parley--busy)
          (setq parley--busy nil)
          (unless expected
            (parley--insert-error text))
          (parley--end-turn-state))))
    (unless expected
      (message "The Parley server exited; M-x parley-restart starts it again"))))

(setq parley--server-handlers (list :notification #'parley--handle-notification
                                    :request #'parley--handle-request
                                    :shutdown #'parley--on-shutdown))

;;;; Buffers of edited files

(defun parley--revert-files (files)
  "Revert the buffers visiting FILES whose file changed on disk.
Return an alist (FILE . WHAT) of what `parley-files-revert' did."
  (cl-loop for file in files
           for what = (parley-files-revert file)
           when what collect (cons file what)))

(defun parley--after-edit (update)
  "After the edit UPDATE completed, show it in the buffers visiting its files.
An edit written through `fs/write_text_file' is there already; one the
server wrote to the disk itself is reverted into unmodified buffers."
  (when (equal (plist-get update :status) "completed")
    (let* ((block (gethash (cons 'tool (plist-get update :toolCallId)) parley--blocks))
           (files (and block (mapcar (lambda (item) (plist-get item :path))
                                     (parley--block-diffs block)))))
      (when files
        (unless (eql (car parley--edited-turns) parley--turn-count)
          (push parley--turn-count parley--edited-turns))
        ;; Not from jsonrpc.el's process filter: reverting runs hooks.
        (run-at-time 0 nil #'parley--revert-files files)))))

(defun parley--revert-restored (result root)
  "Revert the buffers visiting the files the restore RESULT wrote.
Paths are relative to ROOT.  Return the names of the files whose buffers
were left alone (unsaved changes), see `parley--revert-files'."
  (let ((done (parley--revert-files
               (mapcar (lambda (f) (expand-file-name (plist-get f :path) root))
                       (append (plist-get result :files) nil)))))
    (cl-loop for (file . what) in done
             when (eq what 'modified) collect (file-relative-name file root))))

(defun parley--turn-undone (turn result)
  "Show the RESULT of `_parley/session/restore' for TURN: the server's words.
Buffers visiting the files show them as restored; the echo area and the
transcript say what the server said it did (its `text')."
  (let* ((root (file-name-as-directory parley--cwd))
         (kept (parley--revert-restored result root))
         (text (plist-get result :text))
         (rejected (eq (plist-get result :rejected) t)))
    ;; The session changed after a cut-off turn: a retry is a new turn.
    (parley--forget-cut-off-turn)
    (unless (or rejected (eq (plist-get result :cancelled) t))
      ;; The server dropped the checkpoints of this turn and later ones.
      (setq parley--edited-turns (cl-remove-if (lambda (n) (>= n turn)) parley--edited-turns)))
    (if (or rejected (> (length (plist-get result :files)) 0)
            (> (length (plist-get result :failed)) 0))
        ;; The server kept it as `/undo' is kept: shown as it is replayed.
        ;; Not one of the server's numbered turns: the count stays.
        (let ((turns parley--turn-count))
          (parley--show-command-turn "/undo" text)
          (setq parley--turn-count turns))
      ;; Nothing was done, and nothing kept: said once, where it happened.
      (parley--insert-notice (concat "[" text "]")))
    (message "Parley: %s%s" text
             (if kept (format "
(not reverted, unsaved changes: %s)" (string-join kept ", ")) ""))))

(defun parley--show-command-turn (typed answer)
  "Show a slash command turn: the command TYPED, and Parley's ANSWER.
As `session/load' replays it (`_meta.parley.command'), so that the
transcript is the same live and reopened."
  (parley--render-prompt typed nil)
  (parley--update (apply #'parley-wire-update 'message
                        :messageId (format "command-%s" (float-time))
                        :content (list :type "text" :text answer)
                        (parley-wire-with-meta :command t)))
  (parley--close-tail)
  (parley--finish-blocks))

(defun parley--undo-turn (turn)
  "Ask the server to put the files TURN edited back as they were before it."
  (let ((buffer (current-buffer)))
    (parley--with-session
     (lambda (conn)
       (jsonrpc-async-request
        conn '_parley/session/restore
        (list :sessionId parley--session-id :turn turn)
        ;; The server may ask first about a file changed since.
        :timeout parley-turn-timeout
        :success-fn
        (lambda (result)
          ;; Reverting runs hooks: not from jsonrpc.el's process filter.
          (run-at-time 0 nil
                       (lambda ()
                         (parley--with-live-buffer buffer
                           (parley--turn-undone turn result)))))
        :error-fn
        (lambda (err)
          (message "Parley cannot undo turn %d: %s" turn (plist-get err :message))))))))

;;;; Server requests

(defun parley--session-buffer (params)
  "Return the chat buffer of the session PARAMS name (a server request's).
Signal a JSON-RPC error for an unknown session."
  (let ((buffer (gethash (plist-get params :sessionId) parley--sessions)))
    (unless (buffer-live-p buffer)
      (jsonrpc-error :code -32002 :message (format "Unknown session %s"
                                                   (plist-get params :sessionId))))
    buffer))

(defun parley--session-file (params)
  "Return the file PARAMS (`fs/*' params) name, inside its session's workspace.
Signal a JSON-RPC error for an unknown session or a path outside."
  (parley-files-resolve (plist-get params :path)
                        (buffer-local-value 'parley--cwd (parley--session-buffer params))))

(defun parley--write-file (conn id file content)
  "Write CONTENT to FILE for the server's request ID on CONN, and reply."
  (condition-case err
      (progn (parley-files-write file content)
             (parley--reply conn id (make-hash-table)))
    (jsonrpc-error (parley--reply conn id nil
                                  (alist-get 'jsonrpc-error-message (cdr err))
                                  (alist-get 'jsonrpc-error-code (cdr err))))
    (error (parley--reply conn id nil (format "Cannot write %s: %s" file
                                              (error-message-string err))))))

(defun parley--ask-permission (conn id params)
  "Ask the user the server's permission request ID, with PARAMS, on CONN.
The reply goes to the server when the user answers with the
question's keys, or `cancelled' when the turn ends or the buffer is
killed first."
  (let* ((tool (plist-get params :toolCall))
         (options (append (plist-get params :options) nil))
         (buffer (gethash (plist-get params :sessionId) parley--sessions)))
    ;; `parley--ask' returns the question; nil means the buffer is gone.
    (or (parley--with-live-buffer buffer
          (parley--ask
           (format "Parley asks permission: %s%s"
                   (parley-display-escape-controls (or (plist-get tool :title) "a tool") t)
                   (if (plist-get tool :kind) (format " (%s)" (plist-get tool :kind)) ""))
           tool options
           (lambda (option)
             (let ((kind (plist-get option :kind)))
               (when (member kind '("allow_once" "allow_always"))
                 (puthash (plist-get tool :toolCallId)
                          (if (equal kind "allow_always") 'always 'once)
                          parley--approvals)))
             (parley--reply conn id
                            (if option
                                (append
                                 (list :outcome (list :outcome "selected"
                                                      :optionId (plist-get option :optionId)))
                                 ;; ACP's answer has no field for the user's words.
                                 (and (plist-get option :note)
                                      (parley-wire-with-meta :note (plist-get option :note))))
                              '(:outcome (:outcome "cancelled")))))))
        (parley--reply conn id '(:outcome (:outcome "cancelled"))))))

(defconst parley--eval-options
  '((:optionId "allow_once" :name "Evaluate" :kind "allow_once")
    (:optionId "reject_once" :name "Do not evaluate" :kind "reject_once"))
  "The choices of Emacs's own question before it evaluates Lisp.")

(defun parley--call-editor-tool (conn id params)
  "Run the Emacs tool PARAMS asks for; reply to request ID on CONN.
A tool that needs the user's approval, which the server did not ask
for (it was configured to approve it), is asked about inline first.
An error is the reply, so the request is answered whatever happens."
  (condition-case err
      (let* ((name (plist-get params :name))
             (args (plist-get params :arguments))
             (buffer (gethash (plist-get params :sessionId) parley--sessions))
             (approved
              (parley--with-live-buffer buffer
                (let ((approval (gethash (plist-get params :toolCallId)
                                         parley--approvals)))
                  (when (eq approval 'always)
                    (push name parley--always-approved))
                  (and (or approval (member name parley--always-approved)) t)))))
        (if (or approved (not (parley-tools-needs-approval-p name)))
            (parley--reply conn id (parley-tools-call name args approved))
          ;; `parley--ask' returns the question; nil means the buffer is
          ;; gone, and the unapproved call does not run.
          (or (parley--with-live-buffer buffer
                (parley--ask (format "Emacs asks before it evaluates %s (the server did not ask)"
                                     name)
                             (list :title name :kind "execute" :rawInput args)
                             parley--eval-options
                             (lambda (option)
                               ;; Cancelled or rejected, it must not run,
                               ;; whatever `parley-allow-elisp-eval' says by then.
                               (parley--reply conn id
                                              (parley-tools-call
                                               name args
                                               (if (equal (plist-get option :kind) "allow_once")
                                                   t
                                                 'rejected))))))
              (parley--reply conn id (parley-tools-call name args nil)))))
    (error (parley--reply conn id nil (error-message-string err)))))

;;;; Turns

(defvar parley-turn-end-functions nil
  "Functions called in a chat buffer when its turn ended.
Each is called with one argument: non-nil when the turn failed.")

(defun parley--end-turn-state ()
  "Forget the blocks of the turn that ended; fontify its answers.
A question still pending is answered `cancelled': its turn is over."
  (parley--cancel-questions)
  (parley--finish-blocks)
  (force-mode-line-update))

(defconst parley--attempt-kept-notice
  "The earlier attempt is kept: the session changed after it (in another window)."
  "The notice of a retry the server did not run in the cut-off turn's place.")

(defun parley--turn-done (result)
  "Finish the turn whose `session/prompt' RESULT arrived.
Its `_meta.parley' holds the call's `usage', the turn's statistics
\(`turn') and the session's totals (`session'), which the header line
shows as they are."
  (let* ((stats (parley-wire-meta result :turn))
         (totals (parley-wire-meta result :session)))
    (setq parley--busy nil)
    (when (plist-get stats :model)
      (setq parley--model (plist-get stats :model)))
    (let ((turns (plist-get totals :turns)))
      (when (natnump turns)
        (when (eql (car parley--edited-turns) parley--turn-count)
          (setcar parley--edited-turns turns))
        (parley--renumber-last-turn turns)))
    (when totals
      (parley--record-usage 'totals totals))
    ;; Why it stopped is not here: the server said it, in a notice,
    ;; before this result.
    (when (eq (parley-wire-meta result :replaced) :json-false)
      ;; A retry the server ran as a new turn: the attempt it was to
      ;; replace, gone from this buffer, is still in the session.
      (parley--insert-notice parley--attempt-kept-notice))
    (parley--close-tail)
    (when (eq (parley-wire-meta result :kept) :json-false)
      (parley--drop-refused-command))
    (parley--end-turn-state)
    (parley--end-turn-extent (equal (plist-get result :stopReason) "cancelled"))
    (run-hook-with-args 'parley-turn-end-functions nil)))

(defun parley--drop-refused-command ()
  "Take the command the server refused and did not keep out of the transcript.
Such as `/mode pl': a typo, not a turn (`_meta.parley.kept: false').
Its label and text go; the server's notice, which says why, stays.
The turn's number stays the server's count.  \[parley-previous-input]
brings the command back to the prompt, to be fixed."
  (let* ((start parley--turn-start)
         (text (and start (text-property-any start parley--output
                                             'face 'parley-user-text)))
         (end (and text (next-single-property-change text 'face nil parley--output))))
    (when end
      (parley--writing (delete-region start end))
      (setq parley--role nil))))

(defconst parley--provider-error -32001
  "The JSON-RPC error code of a model provider's failure: worth a retry.")

(defconst parley--internal-error -32603
  "The JSON-RPC error code of Parley's own failure, which also ends a turn.
Any other error refused the prompt before its turn began: nothing was
cut off, and `parley-retry' sends it again as a new prompt.")

(defun parley--turn-failed (err &optional prompt-answer)
  "Show the error ERR that ended the turn.
A provider's failure (`parley--provider-error') says how to retry.
PROMPT-ANSWER is non-nil when ERR is the server's answer to the turn's
`session/prompt': a provider's or Parley's own failure cut the turn
off, and `parley-retry' replaces it (a dead server's, code -1, is no
answer; another error refused the prompt before its turn began)."
  (setq parley--busy nil)
  (let ((code (plist-get err :code))
        (data (plist-get err :data)))
    ;; A dead server is reported by `parley--on-shutdown', with its stderr.
    (unless (eql code -1)
      ;; The server's stderr up to here belongs to this error, not a later
      ;; crash; so does what it still logs about it (stderr is another pipe).
      (when (and parley--conn (jsonrpc-running-p parley--conn))
        (let ((conn parley--conn))
          (parley--stderr-reported conn)
          (run-at-time 1 nil (lambda ()
                               (when (jsonrpc-running-p conn)
                                 (parley--stderr-reported conn))))))
      (let ((message (or (plist-get err :message) "the turn failed"))
            (provider (plist-get data :provider)))
        (parley--insert-error
         (concat
          (if (and (stringp provider) (not (string-search provider message)))
              (format "%s (provider %s%s)" message provider
                      (if (plist-get data :status)
                          (format ", status %s" (plist-get data :status))
                        ""))
            message)
          (if (and (eql code parley--provider-error) parley--last-prompt)
              (substitute-command-keys
               "\nRetry: \\<parley-chat-mode-map>\\[parley-retry] sends the prompt again, \
in place of this turn.")
            "")))))
    (parley--end-turn-state)
    (parley--end-turn-extent
     (and prompt-answer (memq code (list parley--provider-error parley--internal-error)))))
  (run-hook-with-args 'parley-turn-end-functions t))

(defun parley--show-version-notice ()
  "Show the notice that the server's version differs, if one is pending.
The first chat buffer that uses a server started since shows it; see
`parley--check-server-version'."
  (when parley--version-notice
    (let ((notice parley--version-notice))
      (setq parley--version-notice nil)
      (parley--insert-notice notice 'parley-warning))))

(defun parley--with-session (fn)
  "Call FN once this buffer's session is active on the live connection.
After a restart the session is resumed first (`session/resume': no
replay, the transcript is here).  A session that cannot be resumed
continues as a new one."
  (let ((conn (parley--live-connection))
        (buffer (current-buffer)))
    (parley--show-version-notice)
    (if (eq parley--conn conn)
        (funcall fn conn)
      (jsonrpc-async-request
       conn 'session/resume
       (append (list :sessionId parley--session-id :cwd parley--cwd :mcpServers [])
               (parley--roots-params parley--cwd))
       :timeout parley-turn-timeout
       :success-fn
       (lambda (result)
         (parley--with-live-buffer buffer
           (setq parley--conn conn)
           (parley--session-result result)
           (funcall fn conn)))
       :error-fn
       (lambda (err)
         (parley--with-live-buffer buffer
           (parley--resume-in-new-session conn (plist-get err :message) fn)))))))

(defun parley--resume-in-new-session (conn why fn)
  "Continue in a new session on CONN, because the old one could not be resumed.
WHY is the server's message; FN is then called with CONN.  This runs
from a response handler, inside jsonrpc.el's process filter, so it
must not wait for an answer: the request is asynchronous."
  (let ((buffer (current-buffer))
        (failed (lambda (message)
                  (parley--turn-failed
                   (list :message (format "cannot resume the session (%s): %s"
                                          why message))))))
    (jsonrpc-async-request
     conn 'session/new
     (append (list :cwd parley--cwd :mcpServers [])
             (parley--roots-params parley--cwd)
             (and parley--model (parley-wire-with-meta :model parley--model)))
     :timeout parley-request-timeout
     :success-fn
     (lambda (result)
       (parley--with-live-buffer buffer
         (let ((id (plist-get result :sessionId)))
           (remhash parley--session-id parley--sessions)
           (parley--register-session id buffer)
           (setq parley--session-id id
                 parley--conn conn)
           (parley--session-result result)
           (parley--insert-notice
            (format "The session could not be resumed (%s); this continues in a new \
session, without the history above." why))
           (funcall fn conn))))
     :error-fn
     (lambda (err)
       (parley--with-live-buffer buffer
         (funcall failed (plist-get err :message))))
     :timeout-fn
     (lambda ()
       (parley--with-live-buffer buffer
         (funcall failed "no answer"))))))

(defun parley--prompt (blocks &optional retry)
  "Send the prompt BLOCKS, a list of ContentBlocks, as a new turn.
With RETRY, ask the server to run it in place of the last turn, which
was cut off (`_meta.parley.retry'); it does unless the session changed
since.  Not in a new session that continues one the server could not
resume: the cut-off turn is not that session's."
  (let ((buffer (current-buffer))
        (session parley--session-id))
    (setq parley--busy t
          parley--last-prompt blocks)
    (force-mode-line-update)
    (parley--with-session
     (lambda (conn)
       (jsonrpc-async-request
        conn 'session/prompt
        (append (list :sessionId parley--session-id :prompt (vconcat blocks))
                (and retry (equal session parley--session-id)
                     (parley-wire-with-meta :retry t)))
        :timeout parley-turn-timeout
        :success-fn (lambda (result)
                      (parley--with-live-buffer buffer (parley--turn-done result)))
        :error-fn (lambda (err)
                    (parley--with-live-buffer buffer (parley--turn-failed err t)))
        :timeout-fn (lambda ()
                      (parley--with-live-buffer buffer
                        (parley--turn-failed
                         (list :message (format "no answer within %s seconds"
                                                parley-turn-timeout))))))))))

(provide 'parley-session)
;;; parley-session.el ends here
