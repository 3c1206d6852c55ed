;;; parley-connection.el --- The connection to the Parley server  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; The `parley serve' process and the JSON-RPC connection to it, shared
;; by all chat buffers: starting it and `initialize' (saying once when
;; the server's version is not this package's), stopping it, its
;; stderr, and replies to server requests that are sent later (once
;; the user answered a question, or an Emacs tool ran).
;;
;; What the server sends is handled in parley-session.el, which sets
;; `parley--server-handlers': this file knows nothing of sessions.

;;; Code:

(require 'cl-lib)
(require 'eieio)
(require 'jsonrpc)
(require 'parley-tools)
(require 'parley-wire)

(defvar parley--server-handlers nil
  "The functions that handle what the server sends, as a plist.
:notification and :request are called with the connection, the
method and its params, :shutdown with the connection.  The file
above that routes them (parley-session.el) sets it.")

(defconst parley-version "0.1.0"
  "The version of the Parley Emacs package (parley.el's Version header).
It is sent as the client's version in `initialize'.")

;;;; Customization

(defcustom parley-server-command '("parley" "serve")
  "The command that starts the Parley server, a program and its arguments."
  :type '(repeat string)
  :group 'parley)

(defcustom parley-server-environment nil
  "Extra environment for the server, a list of \"NAME=VALUE\" strings.
They come before `process-environment', so they override it."
  :type '(repeat string)
  :group 'parley)

(defcustom parley-request-timeout 30
  "Seconds to wait for the server to answer a short request."
  :type 'number
  :group 'parley)

(defcustom parley-events-buffer-size 0
  "Size of the JSON-RPC events log buffer; 0 disables it, nil is unlimited.
Logging every streamed chunk is slow; enable it only to debug."
  :type '(choice (const :tag "Unlimited" nil) integer)
  :group 'parley)

;;;; Buffers that may be gone

(defmacro parley--with-live-buffer (buffer &rest body)
  "Run BODY with BUFFER current if it is still live; return BODY's value.
Return nil without running BODY when BUFFER was killed, as a chat
buffer may be before a reply or a timer for it arrives."
  (declare (indent 1) (debug (form body)))
  (let ((live (make-symbol "buffer")))
    `(let ((,live ,buffer))
       (when (buffer-live-p ,live)
         (with-current-buffer ,live ,@body)))))

;;;; Replies sent later

(cl-defstruct (parley--later (:constructor parley--later (fn)) (:copier nil))
  "A reply to a server request that is sent later, not by the dispatcher.
FN is called with the connection and the request id, and sends the
reply itself (with `parley--reply'), now or once the user answered."
  fn)

(defclass parley--rpc-connection (jsonrpc-process-connection)
  ((expected-exit :initform nil :accessor parley--expected-exit
                  :documentation "Non-nil when Emacs itself stopped the server.")
   (stderr-seen :initform nil :accessor parley--stderr-seen
                :documentation "Marker in the stderr buffer: the end of what was reported.
The stderr buffer outlives a server: what an earlier server, or this
one before an error already shown, wrote is not this crash's."))
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

(defun parley--reply (conn id result &optional error-message error-code)
  "Send RESULT on CONN as the reply to the server's request ID.
With ERROR-MESSAGE, send an error with that message instead, whose
code is ERROR-CODE (default -32603, an internal error).  Nothing is
sent when the server is gone."
  (when (jsonrpc-running-p conn)
    (if error-message
        (jsonrpc-connection-send conn :id id :error (list :code (or error-code -32603)
                                                          :message error-message))
      (jsonrpc-connection-send conn :id id :result result))))

;;;; Requests that wait for their answer

(defun parley--request (conn method params)
  "Send the request METHOD with PARAMS on CONN and return its result.
The messages the server sent right after the answer are read too:
jsonrpc.el 1.0.14's `jsonrpc-request' throws out of the process
filter with the answer, which leaves what came in the same read (a
new session's slash commands, say) unread until the server writes
again.  A JSON-RPC error is signalled as `jsonrpc-error'."
  (prog1 (jsonrpc-request conn method params :timeout parley-request-timeout)
    (let ((proc (jsonrpc--process conn)))
      (when (process-live-p proc)
        (funcall (process-filter proc) proc "")))))

;;;; The server

(defvar parley--connection nil
  "The connection to the Parley server shared by all chat buffers.")

(defvar parley--server-info nil
  "The server's answer to `initialize'.")

(defun parley--server-supports (capability)
  "Return non-nil when the server advertises the session CAPABILITY.
CAPABILITY is a key of `agentCapabilities.sessionCapabilities', such
as `:resume' or `:close'; its value is an object, often empty (which
jsonrpc.el reads as nil), so only its presence counts."
  (plist-member (plist-get (plist-get parley--server-info :agentCapabilities)
                           :sessionCapabilities)
                capability))

(defvar parley--version-said nil
  "The server version whose difference from `parley-version' was said last.
It is said once: a later server of that version says nothing.")

(defvar parley--version-notice nil
  "The notice that the server's version differs, for a chat buffer to show.
The first chat buffer that uses the server shows it, and clears it.")

(defun parley--server-version (info)
  "Return the version of the Parley server whose `initialize' answer is INFO.
Nil when INFO names no version, or another agent than Parley."
  (let* ((agent (plist-get info :agentInfo))
         (version (plist-get agent :version)))
    (and (equal (plist-get agent :name) "parley")
         (stringp version)
         (not (string-empty-p (string-trim version)))
         version)))

(defun parley--version-difference (server)
  "Return the sentence that the server's version SERVER is not this package's."
  (format "Parley server %s differs from parley.el %s: update the server \
\(M-x parley-install-server) or the package."
          ;; One line, whatever the server sent.
          (truncate-string-to-width
           (replace-regexp-in-string "[[:cntrl:]]" "?" server) 40 nil nil "…")
          parley-version))

(defun parley--check-server-version (info)
  "Say once when the server's version, in its `initialize' answer INFO, differs.
In the echo area now, and as a notice in the chat buffer that uses the
server first (`parley--version-notice').  Not again for another server
of the same version; nothing for an agent that names no version."
  (let ((server (parley--server-version info)))
    (setq parley--version-notice nil)
    (cond ((or (null server) (equal server parley-version))
           (setq parley--version-said nil))
          ((not (equal server parley--version-said))
           (setq parley--version-said server
                 parley--version-notice (parley--version-difference server))
           (message "%s" parley--version-notice)))))

(defun parley--events-initargs ()
  "Return the initargs that size the events buffer for this jsonrpc.el."
  (if (slot-exists-p 'jsonrpc-connection '-events-buffer-config)
      (list :events-buffer-config (list :size parley-events-buffer-size))
    (list :events-buffer-scrollback-size parley-events-buffer-size)))

(defun parley--initialize-params ()
  "Return the params of the `initialize' request.
The client asks for hybrid revisions (`revisions'): it replaces the
streamed text with the revised one (see `parley--on-message'), where
a generic ACP client would show both.  It runs the server's commands
in its own terminals (`terminal', parley-terminals.el)."
  (list :protocolVersion 1
        :clientCapabilities
        (append (list :fs (list :readTextFile t :writeTextFile t)
                      :terminal t)
                (parley-wire-with-meta :tools (parley-tools-specs) :revisions t))
        :clientInfo (list :name "parley.el" :version parley-version)))

(defun parley--start-server ()
  "Start the Parley server, initialize it, and return the connection."
  (unless (and parley-server-command
               (executable-find (car parley-server-command)))
    (user-error "Cannot find the Parley server `%s': install it with \
M-x parley-install-server, or set `parley-server-command' to where it is"
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
                :notification-dispatcher (plist-get parley--server-handlers :notification)
                :request-dispatcher (plist-get parley--server-handlers :request)
                :on-shutdown (plist-get parley--server-handlers :shutdown)
                (parley--events-initargs))))
    (setq parley--connection conn)
    (parley--stderr-reported conn)
    (condition-case err
        (setq parley--server-info
              (parley--request conn 'initialize (parley--initialize-params)))
      (jsonrpc-error
       (error "The Parley server did not start: %s%s"
              (or (alist-get 'jsonrpc-error-message (cdr err)) err)
              (parley--stderr-tail conn))))
    (parley--check-server-version parley--server-info)
    conn))

(defun parley--live-connection ()
  "Return the server connection, starting the server if needed."
  (if (and parley--connection (jsonrpc-running-p parley--connection))
      parley--connection
    (parley--start-server)))

(defun parley--stderr-reported (conn)
  "Mark what CONN's server wrote to stderr so far as reported (or not its crash's)."
  (parley--with-live-buffer (ignore-errors (jsonrpc-stderr-buffer conn))
    (let ((seen (parley--stderr-seen conn)))
      (if (markerp seen)
          (set-marker seen (point-max))
        (setf (parley--stderr-seen conn) (copy-marker (point-max)))))))

(defun parley--stderr-tail (conn &optional lines)
  "Return the last LINES (default 8) lines CONN's server wrote to stderr.
Only what it wrote since the last error reported (see
`parley--stderr-reported'): an older traceback is not this one's."
  (or (parley--with-live-buffer (ignore-errors (jsonrpc-stderr-buffer conn))
        (save-excursion (save-restriction
          (let ((seen (parley--stderr-seen conn)))
            (when (and (markerp seen) (marker-buffer seen))
              (narrow-to-region seen (point-max))))
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
                            (line-beginning-position) end)))))))
      ""))

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

(provide 'parley-connection)
;;; parley-connection.el ends here
