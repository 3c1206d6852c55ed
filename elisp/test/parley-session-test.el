;;; parley-session-test.el --- Unit tests of a chat buffer's session (parley-session.el, parley-commands.el)  -*- lexical-binding: t; -*-

;;; Commentary:

;; A stored session reopened, resumed after a restart or continued in a
;; new one, closed; its config options (model, tool policy) and slash
;; commands; all with the requests answered by a fake server.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)
(require 'parley-test)

(ert-deftest parley-open-session-replays-history ()
  ;; The server replays the stored conversation as updates, then answers.
  (let ((parley--connection 'fake-connection)
        (replay
         '("{\"sessionUpdate\":\"user_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"Capital of France?\"}}"
           "{\"sessionUpdate\":\"agent_thought_chunk\",\"content\":{\"type\":\"text\",\"text\":\"Easy.\"},\"messageId\":\"m1\"}"
           "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"Let me check.\"},\"messageId\":\"m1\"}"
           "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c1\",\"title\":\"read_file\",\"kind\":\"read\",\"status\":\"completed\",\"rawInput\":{\"path\":\"atlas.txt\"},\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"France: Paris\"}}]}"
           "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"Paris.\"},\"messageId\":\"m2\"}"))
        requests)
    (cl-letf (((symbol-function 'parley--live-connection) (lambda () 'fake-connection))
              ((symbol-function 'jsonrpc-running-p) (lambda (_) t))
              ((symbol-function 'jsonrpc-async-request)
               (lambda (_conn method params &rest args)
                 (push (cons method params) requests)
                 (when (eq method 'session/load)
                   (dolist (update replay)
                     (parley--handle-notification
                      nil 'session/update
                      (list :sessionId (plist-get params :sessionId)
                            :update (parley-test--json update))))
                   (funcall (plist-get args :success-fn)
                            (list :configOptions (parley-test--json parley-test--config-options)
                                  :_meta '(:parley (:usage (:inputTokens 50 :outputTokens 7 :turns 3
                                                                     :cost (:amount 0.25 :currency "USD"))
                                                       :model "openai:gpt-4.1"))))))))
      (let ((buffer (parley-open-session "sess-old" "/tmp/project" "Capitals")))
        (unwind-protect
            (with-current-buffer buffer
              (should (equal (cdr (assq 'session/load requests))
                             '(:sessionId "sess-old" :cwd "/tmp/project" :mcpServers [])))
              (should-not parley--busy)
              (should (eq parley--conn 'fake-connection))
              (should (equal (parley-test--visible-transcript)
                             "You\nCapital of France?\n\nParley\n▸ Thinking\nLet me check.\n▸ read_file [done]\nParis.\n"))
              (should (string-match-p "France: Paris" (parley-test--transcript)))
              (should (parley--config-option :id "tool_policy"))
              (let ((line (parley--header-line)))
                (should (string-match-p "openai:gpt-4.1" line))
                (should (string-match-p "tokens 50 in / 7 out  \\$0.2500  3 turns" line))
                (should (string-match-p "Capitals" line)))
              ;; Opening it again shows the same buffer.
              (should (eq (parley-open-session "sess-old" "/tmp/project") buffer)))
          (kill-buffer buffer))))))

(ert-deftest parley-resume-falls-back-to-new-session ()
  ;; After a restart the buffer's session is resumed first; when that
  ;; fails, the buffer says so and continues in a new session.
  (pcase-dolist (`(,server ,method)
                 '(("{\"agentCapabilities\":{\"sessionCapabilities\":{\"resume\":{}}}}"
                    session/resume)))
    (let ((parley--server-info (parley-test--json server)))
      (parley-test--with-fake-server
          `((,method . (error :code -32002 :message "Session not found"))
            (session/new . (:sessionId "sess-new"))
            (session/prompt . (:stopReason "end_turn"
                                           :_meta (:parley (:session (:inputTokens 1))))))
        (parley-test--with-chat
          (setq parley--conn 'dead-conn)
          (goto-char (point-max))
          (insert "Still there?")
          (parley-send)
          (should (equal (mapcar #'car (reverse requests))
                         `(,method session/new session/prompt)))
          (should (equal (plist-get (cdr (assq 'session/prompt requests)) :sessionId) "sess-new"))
          (should (equal parley--session-id "sess-new"))
          (should (eq (gethash "sess-new" parley--sessions) (current-buffer)))
          (should-not (gethash parley-test--session parley--sessions))
          (should (string-match-p "could not be resumed (Session not found); this continues in a new session"
                                  (parley-test--transcript))))))))

;;;; Config options

(ert-deftest parley-config-options-kept-from-new-session-and-updates ()
  (parley-test--with-fake-server
      `((session/new . (:sessionId "sess-config"
                                   :configOptions ,(parley-test--json parley-test--config-options))))
    (let ((buffer (parley--new-session-buffer temporary-file-directory)))
      (unwind-protect
          (with-current-buffer buffer
            (should (equal (mapcar (lambda (o) (plist-get o :id)) parley--config-options)
                           '("model" "tool_policy")))
            (should (string-match-p "Parley openai:gpt-4.1-mini" (parley--header-line)))
            ;; Changed elsewhere (a slash command, another window).
            (parley--handle-notification
             nil 'session/update
             (list :sessionId "sess-config"
                   :update (parley-test--json
                            (concat "{\"sessionUpdate\":\"config_option_update\",\"configOptions\":"
                                    (replace-regexp-in-string
                                     "\"currentValue\":\"openai:gpt-4.1-mini\""
                                     "\"currentValue\":\"anthropic:claude-sonnet-4-5\""
                                     parley-test--config-options)
                                    "}"))))
            (should (string-match-p "Parley anthropic:claude-sonnet-4-5" (parley--header-line)))
            ;; Nothing of it shows in the transcript.
            (should (equal (parley-test--transcript) "")))
        (kill-buffer buffer)))))

(ert-deftest parley-set-model-and-tool-policy-with-config-options ()
  ;; The buffer dies inside the fake server, which answers for its
  ;; connection then.
  (parley-test--with-fake-server
      `((session/set_config_option
         . ,(lambda (params)
              (list :configOptions
                    (parley-test--json
                     (replace-regexp-in-string
                      (if (equal (plist-get params :configId) "model")
                          "openai:gpt-4.1-mini\",\"options"
                        "hybrid\",\"options")
                      (concat (plist-get params :value) "\",\"options")
                      parley-test--config-options t t))))))
    (parley-test--with-chat
      (parley--set-config-options (parley-test--json parley-test--config-options))
      (setq parley--conn 'fake-connection)
      (let (offered annotations)
        (cl-letf (((symbol-function 'completing-read)
                   (lambda (_prompt collection &rest args)
                     (setq offered (all-completions "" collection))
                     (let ((annotate (cdr (assq 'annotation-function
                                                (cdr (funcall collection "" nil 'metadata))))))
                       (setq annotations (mapcar annotate offered)))
                     (should (equal (nth 4 args) (if (member "sync" offered)
                                                     "hybrid"
                                                   "openai:gpt-4.1-mini")))
                     (car (last offered)))))
          ;; The models of the option, its groups flattened.
          (call-interactively #'parley-set-model)
          (should (equal offered '("openai:gpt-4.1-mini" "anthropic:claude-sonnet-4-5")))
          (should (equal annotations '("" "  no API key")))
          (should (equal (car requests)
                         '(session/set_config_option
                           :sessionId "sess-unit" :configId "model"
                           :value "anthropic:claude-sonnet-4-5")))
          (should (string-match-p "Parley anthropic:claude-sonnet-4-5" (parley--header-line)))
          ;; The tool policy, the same way.
          (call-interactively #'parley-set-tool-policy)
          (should (equal offered '("hybrid" "stream" "sync")))
          (should (equal (car requests)
                         '(session/set_config_option
                           :sessionId "sess-unit" :configId "tool_policy" :value "sync")))
          (should (equal (plist-get (parley--config-option :id "tool_policy") :currentValue)
                         "sync"))
          (should (= (length requests) 2)))))))

;;;; Session lifecycle: resume, close

(defconst parley-test--lifecycle-server
  "{\"protocolVersion\":1,\"agentCapabilities\":{\"loadSession\":true,\"sessionCapabilities\":{\"list\":{},\"delete\":{},\"resume\":{},\"close\":{}}}}"
  "The answer to `initialize' of a server that can resume and close sessions.")

(ert-deftest parley-restart-resumes-without-replay ()
  ;; After a restart, a server that can resume gets `session/resume':
  ;; the transcript is already in the buffer, nothing is replayed.
  (let ((parley--server-info (parley-test--json parley-test--lifecycle-server)))
    (parley-test--with-fake-server
        `((session/resume . (:configOptions ,(parley-test--json parley-test--config-options)))
          (session/prompt . (:stopReason "end_turn"
                                         :_meta (:parley (:session (:inputTokens 9))))))
      (parley-test--with-chat
        (parley-test--chunk "Earlier answer." "m1")
        (parley--end-turn-state)
        (setq parley--conn 'dead-conn)
        (goto-char (point-max))
        (insert "Still there?")
        (parley-send)
        (should (equal (mapcar #'car (reverse requests)) '(session/resume session/prompt)))
        (should (equal (cdr (assq 'session/resume requests))
                       `(:sessionId ,parley-test--session :cwd ,temporary-file-directory
                                    :mcpServers [])))
        (should (eq parley--conn 'fake-connection))
        (should (equal parley--session-id parley-test--session))
        (should (parley--config-option :id "tool_policy"))
        (should (equal (parley-test--transcript)
                       "Parley\nEarlier answer.\n\nYou\nStill there?\n"))))))

(ert-deftest parley-kill-buffer-closes-session-when-advertised ()
  (dolist (server (list parley-test--lifecycle-server
                        "{\"agentCapabilities\":{\"sessionCapabilities\":{\"list\":{}}}}"))
    (let ((parley--server-info (parley-test--json server)))
      (parley-test--with-fake-server '((session/close . nil))
        ;; Idle: only the close, where the server can.
        (parley-test--with-chat (setq parley--conn 'fake-connection))
        (should (equal requests (if (eq server parley-test--lifecycle-server)
                                    `((session/close :sessionId ,parley-test--session))
                                  nil)))
        ;; During a turn: the cancel first.
        (setq requests nil)
        (parley-test--with-chat (setq parley--conn 'fake-connection parley--busy t))
        (should (equal (reverse (mapcar #'car requests))
                       (if (eq server parley-test--lifecycle-server)
                           '(session/cancel session/close)
                         '(session/cancel))))
        ;; A session not active on the running server is not closed there.
        (setq requests nil)
        (parley-test--with-chat (setq parley--conn 'dead-conn))
        (should-not requests)))))

;;;; Slash commands

(ert-deftest parley-slash-commands-complete-at-prompt ()
  (parley-test--with-chat
    (parley-test--update
     "{\"sessionUpdate\":\"available_commands_update\",\"availableCommands\":[{\"name\":\"model\",\"description\":\"Switch the model\",\"input\":{\"hint\":\"PROVIDER:MODEL\"}},{\"name\":\"cost\",\"description\":\"Show the session's cost\"},{\"name\":\"compact\",\"description\":\"Compact the history\"}]}")
    ;; Kept, not shown.
    (should (equal (mapcar #'parley--command-name parley--commands) '("model" "cost" "compact")))
    (should (equal (parley-test--transcript) ""))
    (goto-char (point-max))
    (insert "/co")
    (pcase-let ((`(,beg ,end ,table . ,props)
                 (run-hook-with-args-until-success 'completion-at-point-functions)))
      (should (equal (buffer-substring-no-properties beg end) "co"))
      (should (equal (all-completions "co" table) '("cost" "compact")))
      (should (equal (funcall (plist-get props :annotation-function) "model")
                     " PROVIDER:MODEL  Switch the model")))
    ;; TAB completes a unique one.
    (parley--set-input "/mo")
    (parley-tab)
    (should (equal (parley--current-input) "/model"))
    ;; Only at the start of the prompt, and only the command's word.
    (parley--set-input "/model openai:gp")
    (should-not (parley--command-completion))
    (parley--set-input "tell me /co")
    (should-not (parley--command-completion))
    ;; A prompt that is a command goes to the server as it is.
    (let (sent)
      (cl-letf (((symbol-function 'parley--prompt) (lambda (blocks) (setq sent blocks))))
        (parley--set-input "/cost")
        (parley-send)
        (should (equal sent '((:type "text" :text "/cost"))))))))

(ert-deftest parley-state-updates-before-the-buffer-are-kept ()
  ;; The server announces the commands right after its answer to
  ;; session/new, which may be read before Emacs made the buffer.
  (let ((id "sess-early"))
    (parley--handle-notification
     nil 'session/update
     (list :sessionId id
           :update (parley-test--json
                    "{\"sessionUpdate\":\"available_commands_update\",\"availableCommands\":[{\"name\":\"old\",\"description\":\"x\"}]}")))
    (parley--handle-notification
     nil 'session/update
     (list :sessionId id
           :update (parley-test--json
                    "{\"sessionUpdate\":\"available_commands_update\",\"availableCommands\":[{\"name\":\"cost\",\"description\":\"The cost\"}]}")))
    ;; Transcript updates of an unknown session are dropped.
    (parley--handle-notification
     nil 'session/update
     (list :sessionId id
           :update (parley-test--json
                    "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"lost\"}}")))
    (let ((buffer (parley--make-buffer temporary-file-directory id)))
      (unwind-protect
          (with-current-buffer buffer
            (should (equal (mapcar #'parley--command-name parley--commands) '("cost")))
            (should (equal (parley-test--transcript) ""))
            (should-not (gethash id parley--early-updates)))
        (kill-buffer buffer)))))

(ert-deftest parley-additional-directories-sent ()
  ;; The other roots go with session/new and load, the project's own left out.
  (let* ((other (directory-file-name (make-temp-file "parley-root-" t)))
         (parley-additional-directories
          (lambda (root) (list root (file-name-as-directory other)))))
    (unwind-protect
        (parley-test--with-fake-server '((session/new . (:sessionId "sess-roots"))
                                         (session/load . nil))
          (kill-buffer (parley--new-session-buffer "/tmp/project"))
          (should (equal (cdr (assq 'session/new requests))
                         `(:cwd "/tmp/project" :mcpServers [] :additionalDirectories [,other])))
          (kill-buffer (parley-open-session "sess-stored" "/tmp/project"))
          (should (equal (plist-get (cdr (assq 'session/load requests)) :additionalDirectories)
                         (vector other)))
          (let ((parley-additional-directories nil))
            (kill-buffer (parley--new-session-buffer "/tmp/project"))
            (should-not (plist-member (cdr (assq 'session/new requests))
                                      :additionalDirectories))))
      (delete-directory other))))

(provide 'parley-session-test)
;;; parley-session-test.el ends here
