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
;;   TAB                       fold or unfold the thoughts or tool call at point
;;   C-c C-m                   switch the model
;;   C-c C-s                   list the stored sessions and open one
;;   C-c C-b                   add a buffer as context to the next prompt
;;   C-c C-n                   new session for this project
;;   C-c C-q                   go to the permission question Parley waits on
;;
;; A permission question appears in the transcript, with the tool and
;; its input; `y' allows once, `a' always, `n' rejects, with point in
;; the question.  RET never answers it.
;;
;; From any buffer, `parley-send-region' asks about the region and
;; `parley-add-buffer' adds a buffer to the next prompt's context.
;; `parley-restart' restarts the server when it died.
;;
;; Streaming is O(1) per chunk: text goes in at a marker, nothing of
;; the transcript is rendered again, and the window follows the end
;; only while point is in the prompt.  See README.md for more.

;;; Code:

(require 'cl-lib)
(require 'eieio)
(require 'jsonrpc)
(require 'project)
(require 'subr-x)
(require 'url-util)
(require 'parley-tools)

(declare-function markdown-mode "ext:markdown-mode" ())

(defconst parley-version "0.1.0"
  "The version of the Parley Emacs package.")

;;;; Customization

(defgroup parley nil
  "Chat with the Parley coding agent."
  :group 'tools
  :prefix "parley-")

(defcustom parley-server-command '("parley" "serve")
  "The command that starts the Parley server, a program and its arguments."
  :type '(repeat string))

(defcustom parley-server-environment nil
  "Extra environment for the server, a list of \"NAME=VALUE\" strings.
They come before `process-environment', so they override it."
  :type '(repeat string))

(defcustom parley-default-model nil
  "The model new sessions use, as PROVIDER:MODEL; nil means the server's."
  :type '(choice (const :tag "The server's default" nil) string))

(defcustom parley-tool-policy nil
  "How the server handles tool calls in new sessions; nil means its default."
  :type '(choice (const :tag "The server's default" nil)
                 (const "hybrid") (const "stream") (const "sync")))

(defcustom parley-turn-timeout nil
  "Seconds a turn may take before Emacs stops waiting; nil means no limit.
A turn can run for a long time (tools, permission prompts), so it is
not bound by `jsonrpc-default-request-timeout'."
  :type '(choice (const :tag "No limit" nil) number))

(defcustom parley-request-timeout 30
  "Seconds to wait for the server to answer a short request."
  :type 'number)

(defcustom parley-events-buffer-size 0
  "Size of the JSON-RPC events log buffer; 0 disables it, nil is unlimited.
Logging every streamed chunk is slow; enable it only to debug."
  :type '(choice (const :tag "Unlimited" nil) integer))

(defcustom parley-prompt-string "> "
  "The string shown before the prompt."
  :type 'string)

(defcustom parley-fold-thoughts t
  "Non-nil means a thought section folds when the answer starts."
  :type 'boolean)

(defcustom parley-tool-display-limit 4000
  "Maximum characters of a tool's input or output shown in the buffer."
  :type 'integer)

(defcustom parley-context-limit 200000
  "Maximum characters of a buffer or region sent as context."
  :type 'integer)

(defcustom parley-fontify-markdown t
  "Non-nil means answers are fontified as Markdown when a turn ends.
This needs the `markdown-mode' package; without it nothing happens."
  :type 'boolean)

(defcustom parley-chat-mode-hook nil
  "Hook run when a Parley chat buffer is set up."
  :type 'hook)

;;;; Faces

(defface parley-user-header '((t :inherit font-lock-keyword-face :weight bold))
  "Face for the label before the user's prompt.")

(defface parley-user-text '((t :inherit font-lock-doc-face))
  "Face for the user's prompt in the transcript.")

(defface parley-agent-header '((t :inherit font-lock-function-name-face :weight bold))
  "Face for the label before the agent's answer.")

(defface parley-section-header '((t :inherit font-lock-comment-face :weight bold))
  "Face for the header of a thought section.")

(defface parley-thought '((t :inherit font-lock-comment-face))
  "Face for the agent's thoughts.")

(defface parley-tool-header '((t :inherit font-lock-constant-face))
  "Face for the header line of a tool call.")

(defface parley-tool-body '((t :inherit shadow))
  "Face for a tool call's input and output.")

(defface parley-status-pending '((t :inherit shadow))
  "Face for the status of a tool call not yet started.")

(defface parley-status-running '((t :inherit warning))
  "Face for the status of a running tool call.")

(defface parley-status-done '((t :inherit success))
  "Face for the status of a finished tool call.")

(defface parley-status-failed '((t :inherit error))
  "Face for the status of a failed tool call.")

(defface parley-error '((t :inherit error))
  "Face for errors shown in the transcript.")

(defface parley-notice '((t :inherit shadow :slant italic))
  "Face for notices in the transcript (cancelled, turn statistics).")

(defface parley-prompt '((t :inherit minibuffer-prompt))
  "Face for the prompt string.")

(defface parley-question-header '((t :inherit warning :weight bold))
  "Face for the first line of a permission question.")

(defface parley-question-key '((t :inherit help-key-binding))
  "Face for the keys that answer a permission question.")

(defface parley-allowed '((t :inherit success))
  "Face for the line an allowed permission question collapses to.")

(defface parley-rejected '((t :inherit error))
  "Face for the line a rejected permission question collapses to.")

;;;; Chat buffer state

(defvar-local parley--session-id nil
  "The id of this buffer's session.")

(defvar-local parley--cwd nil
  "The workspace root of this buffer's session.")

(defvar-local parley--conn nil
  "The connection on which this buffer's session is active.")

(defvar-local parley--output nil
  "Marker where the transcript grows: its end, just before the prompt.")

(defvar-local parley--start nil
  "Where the transcript starts, after the banner line.")

(defvar-local parley--input nil
  "Marker at the start of the user's input.")

(defvar-local parley--busy nil
  "Non-nil while a turn or a session load is in progress.")

(defvar-local parley--silent nil
  "Non-nil while updates are not shown (a session re-activated after a restart).")

(defvar-local parley--model nil
  "The model of this buffer's session, if known.")

(defvar-local parley--title nil
  "The session's title, if the server set one.")

(defvar-local parley--usage nil
  "Usage shown in the header line, a plist.
Keys: :in and :out (session tokens before this turn), :turn-in and
:turn-out (this turn so far), :cost (a number or nil), :used and :size
\(context tokens).")

(defvar-local parley--blocks nil
  "Hash table of the blocks that can still change, keyed (KIND . ID).")

(defvar-local parley--tail nil
  "The block at the end of the transcript that streamed text extends.")

(defvar-local parley--open-thoughts nil
  "Thought blocks not folded yet.")

(defvar-local parley--role nil
  "Who the last thing in the transcript is from: `user', `agent' or nil.")

(defvar-local parley--history nil
  "The prompts sent from this buffer, newest first.")

(defvar-local parley--history-pos nil
  "Index in `parley--history' of the prompt shown, or nil.")

(defvar-local parley--history-saved nil
  "The input that was there before browsing the history.")

(defvar-local parley--context nil
  "Resource blocks to send with the next prompt, in order.")

(defvar-local parley--approvals nil
  "Hash table: toolCallId to `once' or `always', as the user answered.")

(defvar-local parley--always-approved nil
  "Names of tools the user allowed always in this session.")

(defvar-local parley--questions nil
  "The permission questions waiting for the user's answer, oldest first.")

(cl-defstruct (parley--block (:constructor parley--block-create) (:copier nil))
  "A part of the transcript that can still change.
KIND is `message', `thought', `user' or `tool'; ID its id on the wire;
BEG and END markers around it.  A tool block also has TITLE, STATUS,
INPUT, OUTPUT, RAW-OUTPUT and EXPANDED."
  kind id beg end title status input output raw-output expanded)

;;;; The connection

(cl-defstruct (parley--later (:constructor parley--later (fn)) (:copier nil))
  "A reply to a server request that is sent later, not by the dispatcher.
FN is called with the connection and the request id, and sends the
reply itself (with `parley--reply'), now or once the user answered."
  fn)

(defclass parley--rpc-connection (jsonrpc-process-connection)
  ((expected-exit :initform nil :accessor parley--expected-exit
                  :documentation "Non-nil when Emacs itself stopped the server."))
  :documentation "The connection to a `parley serve' process.")

(cl-defmethod jsonrpc-connection-send ((conn parley--rpc-connection)
                                       &rest args &key id result
                                       &allow-other-keys)
  "Send the message ARGS on CONN, or hand request ID to a `parley--later'.
A request dispatcher returns a `parley--later' RESULT for requests
that wait for the user (a permission question) or may run long (an
Emacs tool): jsonrpc.el replies with the dispatcher's value, and this
is where the request's id is known.  jsonrpc.el 1.0.14 (Emacs 28) does
not survive its process filter being re-entered, so nothing that
FN starts here may wait for input or for the server."
  (if (parley--later-p result)
      (condition-case-unless-debug err
          (funcall (parley--later-fn result) conn id)
        (error (parley--reply conn id nil (error-message-string err))))
    (cl-call-next-method)))

(defun parley--reply (conn id result &optional error-message)
  "Send RESULT on CONN as the reply to the server's request ID.
With ERROR-MESSAGE, send an internal error with that message instead.
Nothing is sent when the server is gone."
  (when (jsonrpc-running-p conn)
    (if error-message
        (jsonrpc-connection-send conn :id id :error (list :code -32603
                                                          :message error-message))
      (jsonrpc-connection-send conn :id id :result result))))

(defvar parley--connection nil
  "The connection to the Parley server shared by all chat buffers.")

(defvar parley--server-info nil
  "The server's answer to `initialize'.")

(defvar parley--sessions (make-hash-table :test #'equal)
  "Map a session id to its chat buffer.")

(defun parley--events-initargs ()
  "Return the initargs that size the events buffer for this jsonrpc.el."
  (if (slot-exists-p 'jsonrpc-connection '-events-buffer-config)
      (list :events-buffer-config (list :size parley-events-buffer-size))
    (list :events-buffer-scrollback-size parley-events-buffer-size)))

(defun parley--initialize-params ()
  "Return the params of the `initialize' request."
  (list :protocolVersion 1
        :clientCapabilities
        (list :_meta (list :parley (list :tools (parley-tools-specs))))
        :clientInfo (list :name "parley.el" :version parley-version)))

(defun parley--start-server ()
  "Start the Parley server, initialize it, and return the connection."
  (unless (and parley-server-command
               (executable-find (car parley-server-command)))
    (user-error "Cannot find the Parley server `%s'; see `parley-server-command'"
                (car parley-server-command)))
  (let* ((name "parley")
         (default-directory (expand-file-name "~/"))
         (process-environment (append parley-server-environment
                                      process-environment))
         (conn (apply
                #'make-instance 'parley--rpc-connection
                :name name
                :process (lambda ()
                           (make-process
                            :name name
                            :command parley-server-command
                            :connection-type 'pipe
                            :coding 'utf-8-emacs-unix
                            :noquery t
                            :stderr (get-buffer-create
                                     (format "*%s stderr*" name))))
                :notification-dispatcher #'parley--handle-notification
                :request-dispatcher #'parley--handle-request
                :on-shutdown #'parley--on-shutdown
                (parley--events-initargs))))
    (setq parley--connection conn)
    (condition-case err
        (setq parley--server-info
              (jsonrpc-request conn 'initialize (parley--initialize-params)
                               :timeout parley-request-timeout))
      (jsonrpc-error
       (error "The Parley server did not start: %s%s"
              (or (alist-get 'jsonrpc-error-message (cdr err)) err)
              (parley--stderr-tail conn))))
    conn))

(defun parley--live-connection ()
  "Return the server connection, starting the server if needed."
  (if (and parley--connection (jsonrpc-running-p parley--connection))
      parley--connection
    (parley--start-server)))

(defun parley--stderr-tail (conn &optional lines)
  "Return the last LINES (default 8) lines CONN's server wrote to stderr."
  (let ((buffer (ignore-errors (jsonrpc-stderr-buffer conn))))
    (if (not (buffer-live-p buffer))
        ""
      (with-current-buffer buffer
        (save-excursion
          (goto-char (point-max))
          (skip-chars-backward " \t\n")
          ;; Leave out the line Emacs adds when the process ends.
          (when (save-excursion (beginning-of-line)
                                (looking-at-p "Process .* \\(finished\\|exited\\|killed\\)"))
            (forward-line -1)
            (end-of-line)
            (skip-chars-backward " \t\n"))
          (let ((end (point)))
            (forward-line (- 1 (or lines 8)))
            (if (= (point) end)
                ""
              (concat "\n" (buffer-substring-no-properties
                            (line-beginning-position) end)))))))))

(defun parley--on-shutdown (conn)
  "Report in the chat buffers that CONN's server exited."
  (let* ((proc (jsonrpc--process conn))
         (expected (parley--expected-exit conn))
         (text (format "The Parley server exited (%s %s).%s\n\
Run M-x parley-restart to start it again."
                       (process-status proc) (process-exit-status proc)
                       (parley--stderr-tail conn))))
    (dolist (buffer (parley--chat-buffers))
      (with-current-buffer buffer
        (when (or (eq parley--conn conn) parley--busy)
          (setq parley--busy nil)
          (unless expected
            (parley--insert-error text))
          (parley--end-turn-state))))
    (unless expected
      (message "The Parley server exited; M-x parley-restart starts it again"))))

(defun parley-shutdown ()
  "Stop the Parley server."
  (interactive)
  (when (and parley--connection (jsonrpc-running-p parley--connection))
    (let ((conn parley--connection)
          (proc (jsonrpc--process parley--connection)))
      (setf (parley--expected-exit conn) t)
      ;; The server exits when its stdin closes; give it a moment.
      (ignore-errors (process-send-eof proc))
      (with-timeout (2 nil)
        (while (process-live-p proc)
          (accept-process-output proc 0.05)))
      (jsonrpc-shutdown conn)))
  (setq parley--connection nil))

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

;;;; Dispatch

(defun parley--handle-notification (_conn method params)
  "Handle the notification METHOD with PARAMS from the server."
  (when (eq method 'session/update)
    (let ((buffer (gethash (plist-get params :sessionId) parley--sessions)))
      (when (buffer-live-p buffer)
        (with-current-buffer buffer
          (condition-case-unless-debug err
              (unless parley--silent
                (parley--update (plist-get params :update)))
            (error (message "Parley: cannot show an update: %s"
                            (error-message-string err)))))))))

(defun parley--handle-request (_conn method params)
  "Answer the request METHOD with PARAMS from the server."
  (pcase method
    ('session/request_permission
     (parley--later (lambda (conn id) (parley--ask-permission conn id params))))
    ('_parley/editor/callTool
     (parley--later (lambda (conn id)
                      (run-at-time 0 nil #'parley--call-editor-tool conn id params))))
    (_ (jsonrpc-error :code -32601 :message (format "Unknown method %s" method)))))

(defvar json-false)
(defvar json-null)
(declare-function json-encode "json" (object))

(defun parley--json-encode (value)
  "Encode VALUE (a plist or vector from jsonrpc.el) as a JSON string.
Emacs 28 has `json-serialize' only when built with libjansson;
otherwise json.el does it, as it does for jsonrpc.el."
  (if (fboundp 'json-serialize)
      (json-serialize value :null-object nil :false-object :json-false)
    (require 'json)
    (let ((json-false :json-false)
          (json-null nil))
      (json-encode value))))

(defun parley--json-brief (value &optional limit)
  "Return VALUE (as jsonrpc.el parsed it) as compact text, at most LIMIT chars."
  (let ((text (if (stringp value)
                  value
                (condition-case nil
                    (parley--json-encode value)
                  (error (prin1-to-string value))))))
    (if (and limit (> (length text) limit))
        (concat (substring text 0 limit) "…")
      text)))

(defun parley--chat-buffers ()
  "Return the live Parley chat buffers."
  (cl-remove-if-not (lambda (b) (with-current-buffer b
                                  (derived-mode-p 'parley-chat-mode)))
                    (buffer-list)))

;;;; Writing the transcript

(defmacro parley--writing (&rest body)
  "Run BODY with the transcript writable and no undo recording.
Point is restored afterwards.  Undo entries of the input would point
to wrong places once text is added above it, so they are dropped."
  (declare (indent 0) (debug t))
  `(prog1 (let ((inhibit-read-only t)
                (buffer-undo-list t))
            (save-excursion ,@body))
     (when (consp buffer-undo-list)
       (setq buffer-undo-list nil))))

(defun parley--props (string &rest props)
  "Add PROPS to all of STRING, read-only included, and return it."
  (add-text-properties 0 (length string) (cons 'read-only (cons t props)) string)
  string)

(defun parley--emit (string)
  "Insert STRING at the end of the transcript; return its start position.
STRING carries its own properties.  This is the streaming path: it
costs the same however long the buffer is."
  (parley--writing
    (goto-char parley--output)
    (prog1 (point)
      (insert string))))

(defun parley--close-tail ()
  "End the block at the end of the transcript; start a new line."
  (when parley--tail
    (let ((b parley--tail))
      (setq parley--tail nil)
      (when (eq (parley--block-kind b) 'thought)
        (parley--finish-thought b))))
  (let ((end (marker-position parley--output)))
    (when (and (> end (point-min))
               (/= (char-before end) ?\n))
      (parley--emit (parley--props (string ?\n))))))

(defun parley--new-block (kind id &rest slots)
  "Start a block of KIND with ID at the end of the transcript and return it.
SLOTS are more slot values for `parley--block-create'."
  (parley--close-tail)
  (let* ((pos (marker-position parley--output))
         (block (apply #'parley--block-create
                       :kind kind :id id
                       :beg (copy-marker pos) :end (copy-marker pos)
                       slots)))
    (puthash (cons kind id) block parley--blocks)
    block))

(defun parley--append (block string)
  "Append STRING to BLOCK, which is at the end of the transcript."
  (parley--emit string)
  (set-marker (parley--block-end block) parley--output)
  (setq parley--tail block))

(defun parley--extend (block text)
  "Append TEXT to BLOCK, the tail, with the properties of BLOCK's last char.
The text joins the last text-property interval instead of adding
one per chunk, so a long answer costs the garbage collector nothing
more than a short one."
  (parley--writing
    (goto-char parley--output)
    (insert-and-inherit (substring-no-properties text)))
  (set-marker (parley--block-end block) parley--output))

(defun parley--replace (block string)
  "Replace the text of BLOCK with STRING, keeping markers around it right."
  (let ((beg (marker-position (parley--block-beg block)))
        (end (marker-position (parley--block-end block))))
    (parley--writing
      (if (= beg end)
          (progn (goto-char beg) (insert string)
                 (set-marker (parley--block-end block) (point)))
        ;; Insert after the old text, pushing every marker at its end
        ;; (the next block, the output marker) past the new text, then
        ;; delete the old text; markers at its start stay put.
        (goto-char end)
        (insert-before-markers string)
        (delete-region beg end)))))

(defun parley--ensure-role (role)
  "Insert the label of ROLE (`user' or `agent') unless it is the last one."
  (unless (eq parley--role role)
    (parley--close-tail)
    (setq parley--role role)
    (parley--emit
     (parley--props (concat (if (> parley--output parley--start) "\n" "")
                            (if (eq role 'user) "You" "Parley")
                            "\n")
                    'face (if (eq role 'user) 'parley-user-header 'parley-agent-header)))))

(defun parley--insert-notice (text &optional face)
  "Insert TEXT on its own line in FACE (default `parley-notice')."
  (parley--close-tail)
  (parley--emit (parley--props (concat text "\n") 'face (or face 'parley-notice))))

(defun parley--insert-error (text)
  "Insert the error TEXT in the transcript."
  (parley--insert-notice (concat "Error: " text) 'parley-error))

;;;; Sections: thoughts and tool calls

(defconst parley--arrow-open ?▾
  "The character before an unfolded section's header.")

(defconst parley--arrow-closed ?▸
  "The character before a folded section's header.")

(defun parley--set-folded (id folded &optional hbeg)
  "Fold (when FOLDED) or unfold the section ID; return non-nil if found.
HBEG is where its header starts, when known.  Sections are marked by
text properties: the header carries `parley-header' and the body
`parley-body', both ID."
  (let ((hbeg (or hbeg
                  (and (parley--block-p id)
                       (marker-position (parley--block-beg id)))
                  (text-property-any (point-min) parley--output 'parley-header id))))
    (when hbeg
      (let* ((bbeg (next-single-property-change hbeg 'parley-header nil parley--output))
             (bend (if (eq (get-text-property bbeg 'parley-body) id)
                       (next-single-property-change bbeg 'parley-body nil parley--output)
                     bbeg)))
        (parley--writing
          (when (< bbeg bend)
            (put-text-property bbeg bend 'invisible (and folded 'parley-hidden)))
          (let ((from (if folded parley--arrow-open parley--arrow-closed))
                (to (if folded parley--arrow-closed parley--arrow-open)))
            (when (eq (char-after hbeg) from)
              (subst-char-in-region hbeg (1+ hbeg) from to t))))
        (when (parley--block-p id)
          (setf (parley--block-expanded id) (not folded)))
        t))))

(defun parley--section-at (pos)
  "Return the id of the section whose header line POS is on, or nil.
POS may also be just after the section's body (the end of a folded
header line)."
  (or (get-text-property pos 'parley-header)
      (and (> pos (point-min))
           (or (get-text-property (1- pos) 'parley-header)
               (get-text-property (1- pos) 'parley-body)))))

(defun parley--section-start (id pos)
  "Return the start of the header of the section ID around POS, or nil.
POS is in the section's header or body, or just after it."
  (let ((pos (if (and (> pos (point-min))
                      (not (eq (get-text-property pos 'parley-header) id))
                      (not (eq (get-text-property pos 'parley-body) id)))
                 (1- pos)
               pos)))
    (when (eq (get-text-property pos 'parley-body) id)
      (setq pos (1- (previous-single-property-change (1+ pos) 'parley-body nil
                                                     (1+ (point-min))))))
    (when (eq (get-text-property pos 'parley-header) id)
      (previous-single-property-change (1+ pos) 'parley-header nil (point-min)))))

(defun parley-toggle-section (&optional pos)
  "Fold or unfold the thoughts or tool call whose header is at POS (point)."
  (interactive)
  (let* ((pos (or pos (point)))
         (id (parley--section-at pos))
         (hbeg (and id (parley--section-start id pos))))
    (unless hbeg (user-error "No section here"))
    (parley--set-folded id (not (eq (char-after hbeg) parley--arrow-closed)) hbeg)))

(defun parley-tab ()
  "Toggle the section at point, or indent in the prompt."
  (interactive)
  (cond ((parley--section-at (point)) (parley-toggle-section))
        ((>= (point) parley--input) (indent-for-tab-command))
        (t (parley-next-section))))

(defun parley-next-section ()
  "Move to the next thought or tool call header."
  (interactive)
  (let ((pos (next-single-property-change (point) 'parley-header nil parley--output)))
    (when (and pos (< pos parley--output) (not (get-text-property pos 'parley-header)))
      (setq pos (next-single-property-change pos 'parley-header nil parley--output)))
    (if (and pos (< pos parley--output))
        (goto-char pos)
      (user-error "No more sections"))))

(defun parley--start-thought (id)
  "Start a thought section with ID and return its block."
  (let ((block (parley--new-block 'thought id)))
    (parley--append block (parley--props (string parley--arrow-open ?\s)
                                         'parley-header block
                                         'face 'parley-section-header))
    (parley--append block (parley--props "Thinking" 'parley-header block
                                         'face 'parley-section-header))
    (parley--append block (parley--props (string ?\n) 'parley-body block
                                         'face 'parley-thought))
    (push block parley--open-thoughts)
    block))

(defun parley--finish-thought (block)
  "End the thought BLOCK with a visible newline after its body."
  (let ((end (marker-position (parley--block-end block))))
    (parley--writing
      (if (and (eq (char-before end) ?\n)
               (> end (1+ (next-single-property-change
                           (parley--block-beg block) 'parley-header nil end))))
          ;; The body ends in a newline: make that one the visible end.
          (remove-list-of-text-properties (1- end) end '(parley-body invisible))
        (goto-char end)
        (insert (parley--props (string ?\n)))
        (when (= end parley--output)
          (set-marker parley--output (point)))
        (set-marker (parley--block-end block) (point))))))

(defun parley--fold-thoughts ()
  "Fold the thoughts of this turn that are still open."
  (when parley--open-thoughts
    (let ((thoughts parley--open-thoughts))
      (setq parley--open-thoughts nil)
      (when (and parley--tail (memq parley--tail thoughts))
        (parley--close-tail))
      (when parley-fold-thoughts
        (dolist (block thoughts)
          (parley--set-folded block t))))))

(defun parley--status-label (status)
  "Return the label and face of the tool STATUS as a cons."
  (pcase status
    ("in_progress" '("running" . parley-status-running))
    ("completed" '("done" . parley-status-done))
    ("failed" '("failed" . parley-status-failed))
    ("superseded" '("superseded" . parley-status-failed))
    (_ '("pending" . parley-status-pending))))

(defun parley--indent (text)
  "Return TEXT with each line indented by four spaces."
  (replace-regexp-in-string "^" "    " text))

(defun parley--limit (text)
  "Return TEXT cut to `parley-tool-display-limit' characters."
  (if (<= (length text) parley-tool-display-limit)
      text
    (format "%s\n… [%d more characters]"
            (substring text 0 parley-tool-display-limit)
            (- (length text) parley-tool-display-limit))))

(defun parley--input-text (input)
  "Return the tool INPUT (a plist or other JSON value) as readable lines."
  (if (and (consp input) (keywordp (car input)))
      (mapconcat (lambda (pair)
                   (let ((value (cadr pair)))
                     (format "%s: %s" (substring (symbol-name (car pair)) 1)
                             (if (stringp value)
                                 (if (string-search "\n" value)
                                     (concat "\n" (parley--indent value))
                                   value)
                               (parley--json-brief value)))))
                 (cl-loop for (key value) on input by #'cddr
                          collect (list key value))
                 "\n")
    (parley--json-brief input)))

(defun parley--tool-output-text (block)
  "Return the output of the tool BLOCK as text, or nil."
  (let ((content (parley--block-output block))
        (raw (parley--block-raw-output block)))
    (cond (content
           (mapconcat (lambda (item)
                        (let ((inner (plist-get item :content)))
                          (or (plist-get inner :text)
                              (plist-get item :text)
                              (parley--json-brief item))))
                      content "\n"))
          (raw (parley--json-brief raw)))))

(defun parley--tool-string (block)
  "Return the transcript text of the tool BLOCK: a header and a body."
  (let* ((expanded (parley--block-expanded block))
         (status (parley--status-label (parley--block-status block)))
         (title (car (split-string (or (parley--block-title block) "tool") "\n")))
         (title (truncate-string-to-width title 100 nil nil "…"))
         (input (parley--block-input block))
         (output (parley--tool-output-text block))
         (body (concat
                (if input
                    (concat "\n  input:\n" (parley--indent (parley--limit (parley--input-text input))))
                  "")
                (if output
                    (concat "\n  output:\n"
                            (parley--indent (parley--limit (string-trim-right output))))
                  ""))))
    (concat
     (parley--props (concat (string (if expanded parley--arrow-open parley--arrow-closed))
                            " " title " ")
                    'parley-header block 'face 'parley-tool-header)
     (parley--props (concat "[" (car status) "]")
                    'parley-header block 'face (cdr status))
     (if (string-empty-p body)
         ""
       (parley--props body 'parley-body block 'face 'parley-tool-body
                      'invisible (unless expanded 'parley-hidden)))
     (parley--props (string ?\n)))))

(defun parley--tool-update (update)
  "Show the `tool_call' or `tool_call_update' UPDATE."
  (let* ((id (plist-get update :toolCallId))
         (block (gethash (cons 'tool id) parley--blocks))
         (new (null block)))
    (when new
      (parley--ensure-role 'agent)
      (parley--fold-thoughts)
      (setq block (parley--new-block 'tool id :status "pending")))
    (when (plist-member update :title)
      (setf (parley--block-title block) (plist-get update :title)))
    (when (plist-get update :status)
      (setf (parley--block-status block) (plist-get update :status)))
    (when (plist-member update :rawInput)
      (setf (parley--block-input block) (plist-get update :rawInput)))
    (when (plist-member update :content)
      (setf (parley--block-output block) (append (plist-get update :content) nil)))
    (when (plist-member update :rawOutput)
      (let ((raw (plist-get update :rawOutput)))
        (setf (parley--block-raw-output block) raw)
        (when (and (consp raw) (eq (plist-get raw :superseded) t))
          (setf (parley--block-status block) "superseded"))))
    (if new
        (parley--append block (parley--tool-string block))
      (parley--replace block (parley--tool-string block)))
    (when (eq parley--tail block)
      (setq parley--tail nil))))

;;;; Permission questions

;; A permission question is asked inline, at the end of the transcript,
;; never in the minibuffer: a question read there from a timer or a
;; process filter takes the keys the user types for another buffer, and
;; RET would approve the default.  Here the keys that answer it (`y',
;; `a', `n') are bound only in an overlay over the question, so they
;; work only with point in it, and RET answers nothing.

(defconst parley--choice-keys
  '(("allow_once" "y" "Allowed once" parley-allowed)
    ("allow_always" "a" "Allowed always" parley-allowed)
    ("reject_once" "n" "Rejected" parley-rejected))
  "Option kinds a question offers: (KIND KEY COLLAPSED-LABEL FACE).")

(cl-defstruct (parley--question (:constructor parley--question-create)
                                (:copier nil))
  "A question waiting for the user's answer in a chat buffer.
TITLE names the tool; OPTIONS are the choices (plists with :optionId,
:name and :kind); ON-ANSWER is called once with the chosen option, or
with nil when the question is cancelled; OVERLAY covers the question
in the transcript and carries its keymap."
  title options on-answer overlay)

(defvar parley-question-map
  (let ((map (make-sparse-keymap)))
    (define-key map "y" #'parley-question-allow-once)
    (define-key map "a" #'parley-question-allow-always)
    (define-key map "n" #'parley-question-reject)
    (define-key map (kbd "RET") #'parley-question-help)
    (define-key map "?" #'parley-question-help)
    (define-key map [mouse-1] #'parley-question-click)
    (define-key map [mouse-2] #'parley-question-click)
    map)
  "Keymap active with point in a permission question.")

(defvar parley--waiting-text nil
  "What the global mode line says while Parley waits for the user, or nil.")
(put 'parley--waiting-text 'risky-local-variable t)

(defun parley--code-mode (title)
  "Return the major mode that fontifies the code of the tool TITLE, or nil."
  (let ((case-fold-search t))
    (cond ((string-match-p "lisp" title) #'emacs-lisp-mode)
          ((string-match-p "python" title) #'python-mode))))

(defun parley--face-runs (text mode)
  "Return the faces MODE's font lock gives TEXT, as a list of (FROM TO FACE).
FROM and TO are 0-based offsets in TEXT."
  (let (runs)
    (with-temp-buffer
      (insert text)
      ;; Quietly: python-mode, for one, says how it guessed the indentation.
      (let ((inhibit-message t) (message-log-max nil))
        (delay-mode-hooks (funcall mode)))
      (font-lock-ensure)
      (let ((pos (point-min)))
        (while (< pos (point-max))
          (let ((next (next-single-property-change pos 'face nil (point-max)))
                (face (get-text-property pos 'face)))
            (when face (push (list (1- pos) (1- next) face) runs))
            (setq pos next)))))
    runs))

(defconst parley--fontify-limit 50000
  "Longest code a question fontifies; longer code, shown plain, cannot stall Emacs.")

(defun parley--code-block (code mode)
  "Return CODE indented as a block, fontified by MODE when non-nil."
  (let ((code (copy-sequence (string-trim-right code "\n+"))))
    (when (and mode (<= (length code) parley--fontify-limit))
      (condition-case nil
          (pcase-dolist (`(,from ,to ,face) (parley--face-runs code mode))
            (put-text-property from to 'face face code))
        (error nil)))                   ; plain text is still the code
    (concat (parley--indent code) "\n")))

(defun parley--question-input (input mode)
  "Return the tool INPUT for a question: every field in full.
A string field with several lines, or named code, is a block fontified
by MODE."
  (cond
   ((null input) "")
   ((and (consp input) (keywordp (car input)))
    (cl-loop for (key value) on input by #'cddr
             concat
             (let ((name (substring (symbol-name key) 1)))
               (if (and (stringp value)
                        (or (eq key :code) (string-search "\n" value)))
                   (concat (parley--props (format "  %s:\n" name) 'face 'parley-tool-body)
                           (parley--props (parley--code-block value mode)))
                 (parley--props (format "  %s: %s\n" name
                                        (if (stringp value) value (parley--json-brief value)))
                                'face 'parley-tool-body)))))
   (t (parley--props (concat "  " (parley--json-brief input) "\n") 'face 'parley-tool-body))))

(defun parley--common-lines (a b)
  "Return how many lines the lists A and B share at their start."
  (let ((n 0))
    (while (and a b (equal (car a) (car b)))
      (setq a (cdr a) b (cdr b) n (1+ n)))
    n))

(defun parley--diff-string (path old new)
  "Return the change of PATH from the text OLD (nil: a new file) to NEW.
The lines that differ are shown as one hunk in `diff-mode' faces,
with up to three lines of context on each side."
  (require 'diff-mode)
  (let* ((lines (lambda (text) (split-string (string-remove-suffix "\n" text) "\n")))
         (old-lines (and (stringp old) (funcall lines old)))
         (new-lines (funcall lines (or new "")))
         (head (parley--common-lines old-lines new-lines))
         (tail (parley--common-lines (reverse (nthcdr head old-lines))
                                     (reverse (nthcdr head new-lines))))
         (before (min 3 head))
         (removed (butlast (nthcdr head old-lines) tail))
         (added (butlast (nthcdr head new-lines) tail))
         (after (min 3 tail))
         (start (- head before))
         (line (lambda (prefix text face)
                 (parley--props (concat "    " prefix text "\n") 'face face))))
    (concat
     (funcall line "--- " (if old path "/dev/null") 'diff-file-header)
     (funcall line "+++ " path 'diff-file-header)
     (let ((old-count (+ before (length removed) after))
           (new-count (+ before (length added) after)))
       ;; An empty side starts at line 0, as in diff -u.
       (funcall line "" (format "@@ -%d,%d +%d,%d @@"
                                (if (zerop old-count) start (1+ start)) old-count
                                (if (zerop new-count) start (1+ start)) new-count)
                'diff-hunk-header))
     (mapconcat (lambda (l) (funcall line " " l 'diff-context))
                (cl-subseq new-lines start head) "")
     (mapconcat (lambda (l) (funcall line "-" l 'diff-removed)) removed "")
     (mapconcat (lambda (l) (funcall line "+" l 'diff-added)) added "")
     (mapconcat (lambda (l) (funcall line " " l 'diff-context))
                (cl-subseq new-lines (+ head (length added))
                           (+ head (length added) after))
                ""))))

(defun parley--in-input-p (text input)
  "Return non-nil when TEXT is the value of a field of the tool INPUT."
  (and (consp input) (keywordp (car input))
       (cl-loop for (_key value) on input by #'cddr
                thereis (and (stringp value)
                             (equal (string-trim value) (string-trim text))))))

(defun parley--question-content (item input)
  "Return the ACP tool call content ITEM for a question.
Text already shown as a field of the tool INPUT is not repeated."
  (pcase (plist-get item :type)
    ("content"
     (let ((text (plist-get (plist-get item :content) :text)))
       (if (or (not (stringp text)) (parley--in-input-p text input))
           ""
         (parley--props (parley--code-block text nil) 'face 'parley-tool-body))))
    ("diff"
     (parley--diff-string (or (plist-get item :path) "file")
                          (plist-get item :oldText) (plist-get item :newText)))
    (_ "")))

(defun parley--question-choices (options)
  "Return the line of clickable choices for OPTIONS, with their keys."
  (concat
   (parley--props "  ")
   (mapconcat
    (lambda (option)
      (let* ((kind (plist-get option :kind))
             (key (nth 1 (assoc kind parley--choice-keys))))
        (parley--props (concat (propertize (format "[%s]" key) 'face 'parley-question-key)
                               " " (or (plist-get option :name) kind))
                       'parley-choice kind 'mouse-face 'highlight
                       'help-echo (format "mouse-1 or %s: %s" key
                                          (or (plist-get option :name) kind)))))
    (cl-remove-if-not (lambda (o) (assoc (plist-get o :kind) parley--choice-keys))
                      options)
    (parley--props "   "))
   (parley--props "\n    (press the key with point here; RET does not answer)\n"
                  'face 'parley-notice)))

(defun parley--question-string (header tool options)
  "Return the transcript text of a question: HEADER, TOOL and OPTIONS.
TOOL is the ACP tool call: its title, kind, rawInput and content."
  (let* ((title (or (plist-get tool :title) "a tool"))
         (input (plist-get tool :rawInput)))
    (concat
     (parley--props (concat header "\n") 'face 'parley-question-header)
     (parley--question-input input (parley--code-mode title))
     (mapconcat (lambda (item) (parley--question-content item input))
                (plist-get tool :content) "")
     (parley--question-choices options))))

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
                    :options options :on-answer on-answer :overlay overlay)))
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
      (message "%s" (substitute-command-keys
                     (format "Parley is waiting for you in %s: \
\\<parley-chat-mode-map>\\[parley-goto-question] goes to its question"
                             (buffer-name buffer)))))
    question))

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
                                (parley--question-title question))
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

(defun parley--ask-permission (conn id params)
  "Ask the user the server's permission request ID, with PARAMS, on CONN.
The reply goes to the server when the user answers with the
question's keys, or `cancelled' when the turn ends or the buffer is
killed first."
  (let* ((tool (plist-get params :toolCall))
         (options (append (plist-get params :options) nil))
         (buffer (gethash (plist-get params :sessionId) parley--sessions)))
    (if (not (buffer-live-p buffer))
        (parley--reply conn id '(:outcome (:outcome "cancelled")))
      (with-current-buffer buffer
        (parley--ask
         (format "Parley asks permission: %s%s" (or (plist-get tool :title) "a tool")
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
                              (list :outcome (list :outcome "selected"
                                                   :optionId (plist-get option :optionId)))
                            '(:outcome (:outcome "cancelled"))))))))))

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
              (and (buffer-live-p buffer)
                   (with-current-buffer buffer
                     (let ((approval (gethash (plist-get params :toolCallId)
                                              parley--approvals)))
                       (when (eq approval 'always)
			 (push name parley--always-approved))
                       (or approval (member name parley--always-approved)))))))
	(if (or approved
		(not (parley-tools-needs-approval-p name))
		(not (buffer-live-p buffer)))
            (parley--reply conn id (parley-tools-call name args approved))
          (with-current-buffer buffer
            (parley--ask (format "Emacs asks before it evaluates %s (the server did not ask)"
				 name)
			 (list :title name :kind "execute" :rawInput args)
			 parley--eval-options
			 (lambda (option)
                           ;; Cancelled or rejected, it must not run, whatever
                           ;; the option says by then.
                           (let ((parley-allow-elisp-eval nil))
                             (parley--reply conn id
                                            (parley-tools-call
                                             name args
                                             (equal (plist-get option :kind) "allow_once")))))))))
    (error (parley--reply conn id nil (error-message-string err)))))

(defun parley--question-at (pos)
  "Return the question whose text covers POS in this buffer, or nil."
  (cl-some (lambda (overlay) (overlay-get overlay 'parley-question))
           (overlays-at pos)))

(defun parley--answer-at-point (kind)
  "Answer the question at point with its option of KIND."
  (let* ((question (or (and (derived-mode-p 'parley-chat-mode)
                            (parley--question-at (point)))
                       (user-error "No Parley question at point")))
         (option (or (cl-find kind (parley--question-options question)
                              :key (lambda (o) (plist-get o :kind)) :test #'equal)
                     (user-error "This question does not offer that choice"))))
    (parley--settle question option)
    ;; Back to the prompt, where the window follows the answer.
    (goto-char (point-max))))

(defun parley-question-allow-once ()
  "Allow the tool call of the question at point, this once."
  (interactive)
  (parley--answer-at-point "allow_once"))

(defun parley-question-allow-always ()
  "Allow the tool of the question at point for the rest of the session."
  (interactive)
  (parley--answer-at-point "allow_always"))

(defun parley-question-reject ()
  "Reject the tool call of the question at point."
  (interactive)
  (parley--answer-at-point "reject_once"))

(defun parley-question-help ()
  "Say which keys answer the question at point; answer nothing."
  (interactive)
  (message "Answer with y (allow once), a (allow always) or n (reject)"))

(defun parley-question-click (event)
  "Answer the question with the choice clicked on in EVENT."
  (interactive "e")
  (let* ((position (event-end event))
         (pos (posn-point position)))
    (with-current-buffer (window-buffer (posn-window position))
      (let ((kind (and pos (get-text-property pos 'parley-choice)))
            (question (and pos (parley--question-at pos))))
        (when (and kind question)
          (parley--settle question
                          (cl-find kind (parley--question-options question)
                                   :key (lambda (o) (plist-get o :kind))
                                   :test #'equal)))))))

(defun parley-goto-question ()
  "Show the oldest question Parley waits on, with point in it."
  (interactive)
  (let ((buffer (if (and (derived-mode-p 'parley-chat-mode) parley--questions)
                    (current-buffer)
                  (or (car (parley--waiting-buffers))
                      (user-error "Parley is not waiting for an answer")))))
    (pop-to-buffer buffer)
    (goto-char (overlay-start (parley--question-overlay (car parley--questions))))))

;;;; Updates

(defun parley--meta (update key)
  "Return KEY of UPDATE's `_meta.parley' object."
  (plist-get (plist-get (plist-get update :_meta) :parley) key))

(defun parley--content-text (content)
  "Return the text of a ContentBlock CONTENT."
  (pcase (plist-get content :type)
    ("text" (or (plist-get content :text) ""))
    ("resource" (let ((resource (plist-get content :resource)))
                  (format "[context: %s]\n" (or (plist-get resource :uri) "resource"))))
    ("resource_link" (format "[context: %s]\n" (plist-get content :uri)))
    (_ "")))

(defun parley--on-message (update)
  "Show the `agent_message_chunk' UPDATE."
  (let* ((text (parley--content-text (plist-get update :content)))
         (id (plist-get update :messageId))
         (replaces (parley--meta update :replaces))
         (old (and replaces (gethash (cons 'message replaces) parley--blocks))))
    (parley--fold-thoughts)
    (cond
     (old
      ;; A revision: the synchronous call's text replaces what streamed.
      (parley--replace old (parley--props text))
      (when id (puthash (cons 'message id) old parley--blocks)))
     ((string-empty-p text))
     ((and parley--tail
           (eq (parley--block-kind parley--tail) 'message)
           (or (null id) (equal id (parley--block-id parley--tail))))
      (parley--extend parley--tail text))
     (t
      (parley--ensure-role 'agent)
      (parley--append (parley--new-block 'message id) (parley--props text))))))

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

(defun parley--on-usage (update)
  "Record the `usage_update' UPDATE for the header line."
  (let ((usage (plist-get (plist-get update :_meta) :parley))
        (cost (plist-get update :cost)))
    (setq parley--usage
          (plist-put parley--usage :used (plist-get update :used)))
    (setq parley--usage
          (plist-put parley--usage :size (plist-get update :size)))
    (when usage
      (setq parley--usage
            (plist-put parley--usage :turn-in
                       (+ (or (plist-get parley--usage :turn-in) 0)
                          (or (plist-get usage :inputTokens) 0))))
      (setq parley--usage
            (plist-put parley--usage :turn-out
                       (+ (or (plist-get parley--usage :turn-out) 0)
                          (or (plist-get usage :outputTokens) 0)))))
    (when (numberp (plist-get cost :amount))
      (setq parley--usage (plist-put parley--usage :cost (plist-get cost :amount))))
    (force-mode-line-update)))

(defun parley--update (update)
  "Show the `session/update' UPDATE in the current chat buffer."
  (pcase (plist-get update :sessionUpdate)
    ("agent_message_chunk" (parley--on-message update))
    ("agent_thought_chunk" (parley--on-thought update))
    ("user_message_chunk" (parley--on-user-chunk update))
    ((or "tool_call" "tool_call_update") (parley--tool-update update))
    ("usage_update" (parley--on-usage update))
    ("session_info_update"
     (when (plist-get update :title)
       (setq parley--title (plist-get update :title))
       (force-mode-line-update)))))

;;;; Turns

(defun parley--fontify-region (beg end)
  "Fontify the Markdown between BEG and END, when `markdown-mode' is there."
  (when (and parley-fontify-markdown (< beg end)
             (require 'markdown-mode nil t))
    (let ((runs (parley--face-runs (buffer-substring-no-properties beg end)
                                   #'markdown-mode)))
      (parley--writing
        (pcase-dolist (`(,from ,to ,face) runs)
          (put-text-property (+ beg from) (+ beg to) 'face face))))))

(defun parley--end-turn-state ()
  "Forget the blocks of the turn that ended; fontify its answers.
A question still pending is answered `cancelled': its turn is over."
  (parley--cancel-questions)
  (parley--close-tail)
  (when parley--blocks
    (maphash (lambda (_key block)
               (when (and (eq (parley--block-kind block) 'message)
                          (marker-position (parley--block-beg block)))
                 (parley--fontify-region (parley--block-beg block)
                                         (parley--block-end block))))
             parley--blocks)
    (maphash (lambda (_key block)
               (set-marker (parley--block-beg block) nil)
               (set-marker (parley--block-end block) nil))
             parley--blocks)
    (clrhash parley--blocks))
  (setq parley--tail nil
        parley--open-thoughts nil)
  (force-mode-line-update))

(defun parley--add-usage (usage)
  "Add the turn's USAGE to the session totals in the header line."
  (setq parley--usage
        (plist-put parley--usage :in (+ (or (plist-get parley--usage :in) 0)
                                        (or (plist-get usage :inputTokens) 0))))
  (setq parley--usage
        (plist-put parley--usage :out (+ (or (plist-get parley--usage :out) 0)
                                         (or (plist-get usage :outputTokens) 0))))
  (setq parley--usage (plist-put parley--usage :turn-in nil))
  (setq parley--usage (plist-put parley--usage :turn-out nil)))

(defun parley--refresh-usage ()
  "Ask the server for this session's usage totals and show them."
  (let ((buffer (current-buffer))
        (conn parley--conn))
    (when (and conn (jsonrpc-running-p conn) parley--session-id)
      (jsonrpc-async-request
       conn '_parley/usage (list :sessionId parley--session-id)
       :timeout parley-request-timeout
       :success-fn
       (lambda (result)
         (let ((session (plist-get result :session)))
           (when (and session (buffer-live-p buffer))
             (with-current-buffer buffer
               (setq parley--usage
                     (plist-put parley--usage :in (or (plist-get session :inputTokens) 0)))
               (setq parley--usage
                     (plist-put parley--usage :out (or (plist-get session :outputTokens) 0)))
               (let ((amount (plist-get (plist-get session :cost) :amount)))
                 (when (numberp amount)
                   (setq parley--usage (plist-put parley--usage :cost amount))))
               (force-mode-line-update)))))
       :error-fn #'ignore
       :timeout-fn #'ignore))))

(defun parley--turn-done (result)
  "Finish the turn whose `session/prompt' RESULT arrived."
  (let ((stop (plist-get result :stopReason))
        (stats (plist-get (plist-get result :_meta) :parley)))
    (setq parley--busy nil)
    (when (plist-get stats :model)
      (setq parley--model (plist-get stats :model)))
    (parley--add-usage (plist-get result :usage))
    (parley--close-tail)
    (pcase stop
      ("end_turn" nil)
      ("cancelled" (parley--insert-notice "[cancelled]"))
      ("max_tokens" (parley--insert-notice "[stopped: the answer reached the token limit]"))
      ("max_turn_requests" (parley--insert-notice "[stopped: the turn reached its round limit]"))
      ("refusal" (parley--insert-notice "[the model refused to answer]" 'parley-error))
      (_ (parley--insert-notice (format "[stopped: %s]" stop))))
    (parley--end-turn-state)
    (parley--refresh-usage)))

(defun parley--turn-failed (err)
  "Show the error ERR that ended the turn."
  (setq parley--busy nil)
  (let ((code (plist-get err :code))
        (data (plist-get err :data)))
    ;; A dead server is reported by `parley--on-shutdown', with its stderr.
    (unless (eql code -1)
      (let ((message (or (plist-get err :message) "the turn failed"))
            (provider (plist-get data :provider)))
        (parley--insert-error
         (if (and (stringp provider) (not (string-search provider message)))
             (format "%s (provider %s%s)" message provider
                     (if (plist-get data :status)
                         (format ", status %s" (plist-get data :status))
                       ""))
           message)))))
  (parley--end-turn-state))

(defun parley--with-session (fn)
  "Call FN once this buffer's session is active on the live connection.
After a restart the session is loaded again, silently, first."
  (let ((conn (parley--live-connection))
        (buffer (current-buffer)))
    (if (eq parley--conn conn)
        (funcall fn conn)
      (setq parley--silent t)
      (jsonrpc-async-request
       conn 'session/load
       (list :sessionId parley--session-id :cwd parley--cwd :mcpServers [])
       :timeout parley-turn-timeout
       :success-fn
       (lambda (_result)
         (when (buffer-live-p buffer)
           (with-current-buffer buffer
             (setq parley--silent nil
                   parley--conn conn)
             (funcall fn conn))))
       :error-fn
       (lambda (err)
         (when (buffer-live-p buffer)
           (with-current-buffer buffer
             (setq parley--silent nil)
             (parley--resume-in-new-session conn (plist-get err :message) fn))))))))

(defun parley--resume-in-new-session (conn why fn)
  "Continue in a new session on CONN, because the old one could not load.
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
             (and parley--model
                  (list :_meta (list :parley (list :model parley--model)))))
     :timeout parley-request-timeout
     :success-fn
     (lambda (result)
       (when (buffer-live-p buffer)
         (with-current-buffer buffer
           (let ((id (plist-get result :sessionId)))
             (remhash parley--session-id parley--sessions)
             (puthash id buffer parley--sessions)
             (setq parley--session-id id
                   parley--conn conn)
             (parley--insert-notice
              (format "The session could not be resumed (%s); this continues in a new \
session, without the history above." why))
             (funcall fn conn)))))
     :error-fn
     (lambda (err)
       (when (buffer-live-p buffer)
         (with-current-buffer buffer
           (funcall failed (plist-get err :message)))))
     :timeout-fn
     (lambda ()
       (when (buffer-live-p buffer)
         (with-current-buffer buffer
           (funcall failed "no answer")))))))

(defun parley--prompt (blocks)
  "Send the prompt BLOCKS, a list of ContentBlocks, as a new turn."
  (let ((buffer (current-buffer)))
    (setq parley--busy t)
    (force-mode-line-update)
    (parley--with-session
     (lambda (conn)
       (jsonrpc-async-request
        conn 'session/prompt
        (list :sessionId parley--session-id :prompt (vconcat blocks))
        :timeout parley-turn-timeout
        :success-fn (lambda (result)
                      (when (buffer-live-p buffer)
                        (with-current-buffer buffer (parley--turn-done result))))
        :error-fn (lambda (err)
                    (when (buffer-live-p buffer)
                      (with-current-buffer buffer (parley--turn-failed err))))
        :timeout-fn (lambda ()
                      (when (buffer-live-p buffer)
                        (with-current-buffer buffer
                          (parley--turn-failed
                           (list :message (format "no answer within %s seconds"
                                                  parley-turn-timeout)))))))))))

(defun parley--render-prompt (text context)
  "Show the prompt TEXT and the CONTEXT resources in the transcript."
  (setq parley--role nil)               ; every prompt gets its label
  (parley--ensure-role 'user)
  (dolist (block context)
    (parley--emit (parley--props (parley--content-text block) 'face 'parley-notice)))
  (unless (string-empty-p text)
    (parley--emit (parley--props (concat text "\n") 'face 'parley-user-text))))

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

;;;; Header line

(defun parley--tokens (n)
  "Return the token count N briefly."
  (cond ((null n) "0")
        ((>= n 1000000) (format "%.1fM" (/ n 1000000.0)))
        ((>= n 10000) (format "%.1fk" (/ n 1000.0)))
        (t (number-to-string n))))

(defun parley--cost (amount)
  "Return the USD AMOUNT with as many decimals as make it readable."
  (format (cond ((>= amount 1) "$%.2f")
                ((>= amount 0.01) "$%.3f")
                (t "$%.5f"))
          amount))

(defun parley--header-line ()
  "Return the header line of a chat buffer."
  (let* ((u parley--usage)
         (in (+ (or (plist-get u :in) 0) (or (plist-get u :turn-in) 0)))
         (out (+ (or (plist-get u :out) 0) (or (plist-get u :turn-out) 0)))
         (cost (plist-get u :cost)))
    (concat
     " " (propertize "Parley" 'face 'bold)
     " " (or parley--model "default model")
     (format "  tokens %s in / %s out" (parley--tokens in) (parley--tokens out))
     (if (numberp cost) (concat "  " (parley--cost cost)) "")
     (if (and (plist-get u :used) (plist-get u :size))
         (format "  context %s/%s" (parley--tokens (plist-get u :used))
                 (parley--tokens (plist-get u :size)))
       "")
     (if parley--context (format "  +%d context" (length parley--context)) "")
     (if parley--title (concat "  " (propertize parley--title 'face 'italic)) "")
     (cond (parley--questions
            (propertize (substitute-command-keys
                         "  ● waiting for you: \\<parley-chat-mode-map>\\[parley-goto-question] \
goes to the question")
                        'face 'warning))
           (parley--busy (propertize "  ● working" 'face 'warning))
           ((not (and parley--conn (jsonrpc-running-p parley--conn)))
            (propertize "  ○ not connected" 'face 'shadow))
           (t "")))))

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
    (define-key map (kbd "C-c C-s") #'parley-sessions)
    (define-key map (kbd "C-c C-b") #'parley-add-buffer)
    (define-key map (kbd "C-c C-n") #'parley-new-session)
    (define-key map (kbd "C-c C-q") #'parley-goto-question)
    map)
  "Keymap of `parley-chat-mode'.")

(define-derived-mode parley-chat-mode text-mode "Parley"
  "Major mode of Parley chat buffers.
The transcript is read-only; type your prompt below it.

\\{parley-chat-mode-map}"
  :group 'parley
  (setq-local header-line-format '(:eval (parley--header-line)))
  (setq-local parley--blocks (make-hash-table :test #'equal))
  (setq-local parley--approvals (make-hash-table :test #'equal))
  (add-to-invisibility-spec '(parley-hidden . t))
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
              (propertize parley-prompt-string 'face 'parley-prompt
                          'read-only t 'rear-nonsticky t))
      (setq parley--input (point-marker))
      ;; Made after the prompt is in, which it would otherwise precede.
      (setq parley--output (copy-marker end-of-transcript t)))
    (set-buffer-modified-p nil))
  (setq buffer-undo-list nil)
  (add-hook 'kill-buffer-hook #'parley--forget-buffer nil t))

(defun parley--forget-buffer ()
  "Cancel the turn of the buffer being killed; unregister its session.
The cancel goes first, so that the server, told next that a pending
question was cancelled, does not go on with the turn."
  ;; Nothing here may keep the buffer from dying.
  (condition-case err
      (progn
        (when (and parley--busy parley--conn (jsonrpc-running-p parley--conn))
          (jsonrpc-notify parley--conn 'session/cancel
                          (list :sessionId parley--session-id)))
        (parley--cancel-questions))
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

(defun parley--make-buffer (cwd session-id)
  "Return a new chat buffer for SESSION-ID in CWD."
  (let ((buffer (generate-new-buffer
                 (format "*parley: %s*" (file-name-nondirectory cwd)))))
    (with-current-buffer buffer
      (parley-chat-mode)
      (setq default-directory (file-name-as-directory cwd)
            parley--cwd cwd
            parley--session-id session-id))
    (puthash session-id buffer parley--sessions)
    buffer))

(defun parley--new-session-buffer (cwd)
  "Start a session in CWD and return its new chat buffer."
  (let* ((conn (parley--live-connection))
         (meta (append (and parley-default-model (list :model parley-default-model))
                       (and parley-tool-policy (list :toolPolicy parley-tool-policy))))
         (result (jsonrpc-request
                  conn 'session/new
                  (append (list :cwd cwd :mcpServers [])
                          (and meta (list :_meta (list :parley meta))))
                  :timeout parley-request-timeout))
         (buffer (parley--make-buffer cwd (plist-get result :sessionId))))
    (with-current-buffer buffer
      (setq parley--conn conn
            parley--model (or parley-default-model
                              (parley--meta parley--server-info :defaultModel))))
    buffer))

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
             (let ((result (jsonrpc-request
                            conn 'session/list
                            (append (and cwd (list :cwd cwd))
                                    (and cursor (list :cursor cursor)))
                            :timeout parley-request-timeout)))
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
                             (cond ((numberp d) (format-time-string "%Y-%m-%d %H:%M" d))
                                   ((stringp d) d)
                                   (t ""))))
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
             (when (buffer-live-p buffer)
               (with-current-buffer buffer
                 (let ((meta (plist-get (plist-get result :_meta) :parley)))
                   (setq parley--busy nil
                         parley--conn conn
                         parley--model (or (plist-get meta :model) parley--model))
                   (parley--add-usage (plist-get meta :usage))
                   (let ((cost (plist-get (plist-get (plist-get meta :usage) :cost) :amount)))
                     (when (numberp cost)
                       (setq parley--usage (plist-put parley--usage :cost cost))))
                   (parley--end-turn-state)
                   (parley--refresh-usage)))))
           :error-fn
           (lambda (err)
             (when (buffer-live-p buffer)
               (with-current-buffer buffer
                 (parley--turn-failed
                  (list :message (format "cannot open the session: %s"
                                         (plist-get err :message)))))))))
        buffer))))

;;;###autoload
(defun parley-set-model (model)
  "Switch this chat buffer's session to MODEL (PROVIDER:MODEL)."
  (interactive
   (progn
     (parley--check-buffer)
     (let* ((result (jsonrpc-request (parley--live-connection) '_parley/models
                                     (make-hash-table) :timeout parley-request-timeout))
            (models (append (plist-get result :models) nil))
            (table (mapcar (lambda (m) (cons (plist-get m :id) m)) models)))
       (list (completing-read
              (format "Model (now %s): " (or parley--model "default"))
              (lambda (string pred action)
                (if (eq action 'metadata)
                    `(metadata
                      (annotation-function
                       . ,(lambda (id)
                            (let ((m (cdr (assoc id table))))
                              (if (eq (plist-get m :available) :json-false)
                                  (format "  unavailable: %s" (or (plist-get m :reason) "?"))
                                "")))))
                  (complete-with-action action table string pred)))
              nil nil nil nil (plist-get result :defaultModel))))))
  (parley--check-buffer)
  (let ((buffer (current-buffer)))
    (parley--with-session
     (lambda (conn)
       (jsonrpc-async-request
        conn '_parley/session/configure
        (list :sessionId parley--session-id :model model)
        :timeout parley-request-timeout
        :success-fn (lambda (_)
                      (when (buffer-live-p buffer)
                        (with-current-buffer buffer
                          (setq parley--model model)
                          (force-mode-line-update)
                          (message "Parley now uses %s" model))))
        :error-fn (lambda (err)
                    (message "Parley cannot switch to %s: %s" model
                             (plist-get err :message))))))))

(provide 'parley)
;;; parley.el ends here
