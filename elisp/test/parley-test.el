;;; parley-test.el --- Unit tests for parley.el  -*- lexical-binding: t; -*-

;;; Commentary:

;; The chat buffer fed with synthetic `session/update' notifications
;; (parsed from JSON exactly as jsonrpc.el delivers them), the Emacs
;; tools, and the deferred replies to server requests over a `cat'
;; loopback.  No server needed.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)

(defconst parley-test--session "sess-unit"
  "The session id of the test buffers.")

(defconst parley-test--config-options
  "[{\"id\":\"model\",\"name\":\"Model\",\"category\":\"model\",\"type\":\"select\",\"currentValue\":\"openai:gpt-4.1-mini\",\"options\":[{\"value\":\"openai:gpt-4.1-mini\",\"name\":\"gpt-4.1-mini\"},{\"group\":\"anthropic\",\"name\":\"Anthropic\",\"options\":[{\"value\":\"anthropic:claude-sonnet-4-5\",\"name\":\"Claude Sonnet 4.5\",\"description\":\"no API key\"}]}]},{\"id\":\"tool_policy\",\"name\":\"Tool policy\",\"type\":\"select\",\"currentValue\":\"hybrid\",\"options\":[{\"value\":\"hybrid\",\"name\":\"Hybrid\"},{\"value\":\"stream\",\"name\":\"Stream\"},{\"value\":\"sync\",\"name\":\"Sync\"}]}]"
  "The config options of a session, as the server sends them.")

(defmacro parley-test--with-chat (&rest body)
  "Run BODY in a fresh chat buffer registered for `parley-test--session'."
  (declare (indent 0) (debug t))
  `(let ((buffer (parley--make-buffer temporary-file-directory parley-test--session)))
     (unwind-protect
         (with-current-buffer buffer ,@body)
       (kill-buffer buffer))))

(defun parley-test--json (string)
  "Parse STRING as jsonrpc.el parses a message."
  (json-parse-string string :object-type 'plist :null-object nil
                     :false-object :json-false))

(defun parley-test--update (json)
  "Deliver the update JSON (a JSON object string) as the server would."
  (parley--handle-notification
   nil 'session/update
   (list :sessionId parley-test--session :update (parley-test--json json))))

(defun parley-test--usage-update (used call-in session-in session-out cost &optional size)
  "Return a second-edition `usage_update' as JSON.
The context holds USED tokens of SIZE; the call read CALL-IN tokens;
the session's totals are SESSION-IN, SESSION-OUT and COST (USD)."
  (format "{\"sessionUpdate\":\"usage_update\",\"used\":%d,%s\"cost\":{\"amount\":%s,\"currency\":\"USD\"},\"_meta\":{\"parley\":{\"call\":{\"inputTokens\":%d,\"outputTokens\":1},\"session\":{\"inputTokens\":%d,\"outputTokens\":%d,\"cost\":{\"amount\":%s,\"currency\":\"USD\"},\"turns\":4,\"rounds\":9}}}}"
          used (if size (format "\"size\":%d," size) "") cost call-in
          session-in session-out cost))

(defun parley-test--chunk (text &optional id kind)
  "Deliver a KIND (default agent_message_chunk) chunk TEXT with message ID."
  (parley-test--update
   (json-serialize (list :sessionUpdate (or kind "agent_message_chunk")
                         :content (list :type "text" :text text)
                         :messageId (or id "m1")))))

(defun parley-test--notice (text level &optional id)
  "Deliver the server's notice TEXT at LEVEL (`info', `warning', `error').
ID is its message id (default `notice')."
  (parley-test--update
   (json-serialize (list :sessionUpdate "agent_message_chunk"
                         :messageId (or id "notice")
                         :content (list :type "text" :text text)
                         :_meta (list :parley (list :notice (list :level level)))))))

(defun parley-test--transcript ()
  "Return the transcript text, without properties."
  (buffer-substring-no-properties parley--start parley--output))

(defun parley-test--visible-transcript ()
  "Return the transcript text a user sees (invisible text left out)."
  (let ((pos parley--start) (out ""))
    (while (< pos parley--output)
      (let ((next (next-single-property-change pos 'invisible nil parley--output)))
        (unless (get-text-property pos 'invisible)
          (setq out (concat out (buffer-substring-no-properties pos next))))
        (setq pos next)))
    out))

(defun parley-test--pos (string)
  "Return the position where STRING starts in the buffer."
  (save-excursion
    (goto-char (point-min))
    (and (search-forward string nil t) (match-beginning 0))))

;;;; Streaming and the buffer

(ert-deftest parley-stream-appears-in-order ()
  (parley-test--with-chat
    (dolist (c '("Hel" "lo, " "wor" "ld" "!\nSecond line."))
      (parley-test--chunk c))
    (should (string-match-p "Parley\nHello, world!\nSecond line\\.\\'"
                            (parley-test--transcript)))
    ;; The prompt stays below, and empty.
    (should (equal (parley--current-input) ""))
    (should (equal (buffer-substring-no-properties parley--output parley--input)
                   (concat "\n" parley-prompt-string)))))

(ert-deftest parley-transcript-read-only-prompt-editable ()
  (parley-test--with-chat
    (parley-test--chunk "An answer.")
    (goto-char (point-min))
    (should-error (insert "x") :type 'text-read-only)
    (goto-char (1- parley--output))
    (should-error (insert "x") :type 'text-read-only)
    (goto-char (point-max))
    (insert "my prompt")
    (should (equal (parley--current-input) "my prompt"))
    ;; Streaming while the user types leaves the input alone.
    (parley-test--chunk " More.")
    (should (equal (parley--current-input) "my prompt"))
    (should (string-suffix-p "An answer. More." (parley-test--transcript)))))

(ert-deftest parley-input-undo-stays-consistent ()
  (parley-test--with-chat
    (buffer-enable-undo)
    (goto-char (point-max))
    (insert "abc")
    (undo-boundary)
    (parley-test--chunk "streamed")
    ;; The input's undo entries were dropped rather than left pointing
    ;; at the wrong place; undo must not touch the transcript.
    (should-not (consp buffer-undo-list))
    (should (string-suffix-p "streamed" (parley-test--transcript)))))

(ert-deftest parley-thoughts-fold-when-answer-starts ()
  (parley-test--with-chat
    (parley-test--chunk "Let me " "m1" "agent_thought_chunk")
    (parley-test--chunk "think." "m1" "agent_thought_chunk")
    ;; While thinking, the thoughts show.
    (should (string-match-p "Thinking\nLet me think\\." (parley-test--visible-transcript)))
    (parley-test--chunk "The answer." "m1")
    (let ((visible (parley-test--visible-transcript)))
      (should (string-match-p "▸ Thinking\nThe answer\\." visible))
      (should-not (string-match-p "Let me think" visible)))
    (should (string-match-p "Let me think\\." (parley-test--transcript)))
    ;; TAB on the header unfolds, and folds again.
    (goto-char (parley-test--pos "Thinking"))
    (parley-tab)
    (should (string-match-p "▾ Thinking\nLet me think\\.\nThe answer\\."
                            (parley-test--visible-transcript)))
    (parley-tab)
    (should-not (string-match-p "Let me think" (parley-test--visible-transcript)))
    ;; Also from the end of the folded header line.
    (goto-char (parley-test--pos "Thinking"))
    (end-of-line)
    (parley-toggle-section)
    (should (string-match-p "Let me think" (parley-test--visible-transcript)))))

(ert-deftest parley-thoughts-stay-open-when-folding-disabled ()
  (let ((parley-fold-thoughts nil))
    (parley-test--with-chat
      (parley-test--chunk "hmm" "m1" "agent_thought_chunk")
      (parley-test--chunk "Answer" "m1")
      (should (string-match-p "hmm" (parley-test--visible-transcript))))))

(ert-deftest parley-tool-call-header-and-result ()
  (parley-test--with-chat
    (parley-test--chunk "Looking." "m1")
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"call_1\",\"title\":\"read_file\",\"kind\":\"read\",\"status\":\"pending\"}")
    (should (string-match-p "Looking\\.\n▸ read_file \\[pending\\]\n\\'"
                            (parley-test--transcript)))
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"call_1\",\"status\":\"in_progress\",\"rawInput\":{\"path\":\"README.md\"}}")
    (should (string-match-p "read_file \\[running\\]" (parley-test--transcript)))
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"call_1\",\"status\":\"completed\",\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"# Title\\nbody\"}}]}")
    (should (string-match-p "read_file \\[done\\]" (parley-test--transcript)))
    ;; One header line, folded: the input and output are there but hidden.
    (should (= 1 (cl-count-if (lambda (l) (string-match-p "read_file" l))
                              (split-string (parley-test--transcript) "\n"))))
    (should-not (string-match-p "README" (parley-test--visible-transcript)))
    (should (string-match-p "\"path\": \"README.md\"" (parley-test--transcript)))
    (should (string-match-p "# Title" (parley-test--transcript)))
    (let ((face (get-text-property (parley-test--pos "done") 'face)))
      (should (eq face 'parley-status-done)))
    ;; TAB expands it.
    (goto-char (parley-test--pos "read_file"))
    (parley-tab)
    (should (string-match-p "▾ read_file \\[done\\]\n  input:\n    {\n      \"path\": \"README.md\"\n    }\n  output:\n    # Title\n    body\n"
                            (parley-test--visible-transcript)))
    ;; Text after the tool goes below it.
    (parley-test--chunk "Done reading." "m2")
    (should (string-suffix-p "body\nDone reading." (parley-test--transcript)))
    ;; An update while the tool is no longer last keeps the order.
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"call_1\",\"title\":\"read_file README.md\"}")
    (should (string-match-p "▾ read_file README.md \\[done\\]\n\\(.\\|\n\\)*\nDone reading\\.\\'"
                            (parley-test--transcript)))))

(ert-deftest parley-tool-call-failed-and-superseded ()
  (parley-test--with-chat
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"a\",\"title\":\"python_eval\",\"kind\":\"execute\",\"status\":\"pending\"}")
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"b\",\"title\":\"list_directory\",\"kind\":\"read\",\"status\":\"pending\"}")
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"a\",\"status\":\"failed\",\"_meta\":{\"parley\":{\"superseded\":true}}}")
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"b\",\"status\":\"failed\",\"rawOutput\":\"boom\"}")
    (should (string-match-p "python_eval \\[superseded\\]\n▸ list_directory \\[failed\\]\n\\'"
                            (parley-test--visible-transcript)))
    (should (eq (get-text-property (parley-test--pos "failed") 'face)
                'parley-status-failed))))

(ert-deftest parley-tool-call-human-title-and-content ()
  ;; The second edition's tool call: a title a person reads, and the
  ;; code as `content' besides `rawInput'; the code is shown once.
  (parley-test--with-chat
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"p1\",\"title\":\"Run Python\",\"kind\":\"execute\",\"status\":\"pending\",\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"print(6 * 7)\"}}]}")
    (should (string-match-p "▸ Run Python \\[pending\\]\n\\'" (parley-test--visible-transcript)))
    ;; Before the call ends, its content is what it is about.
    (goto-char (parley-test--pos "Run Python"))
    (parley-tab)
    (should (string-match-p "▾ Run Python \\[pending\\]\n  content:\n    print(6 \\* 7)\n\\'"
                            (parley-test--visible-transcript)))
    ;; The arguments arrive: the same code is not repeated.
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"p1\",\"status\":\"in_progress\",\"rawInput\":{\"code\":\"print(6 * 7)\"}}")
    (should (string-match-p "▾ Run Python \\[running\\]\n  input:\n    print(6 \\* 7)\n\\'"
                            (parley-test--visible-transcript)))
    ;; Its result replaces the content.
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"p1\",\"status\":\"completed\",\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"42\"}}]}")
    (should (string-match-p "▾ Run Python \\[done\\]\n  input:\n    print(6 \\* 7)\n  output:\n    42\n\\'"
                            (parley-test--visible-transcript)))))

(ert-deftest parley-tool-call-locations-open-the-file ()
  (let ((root (file-name-as-directory (make-temp-file "parley-locations-" t))))
    (unwind-protect
        (parley-test--with-chat
          (setq default-directory root)
          (make-directory (expand-file-name "src" root))
          (with-temp-file (expand-file-name "src/app.py" root)
            (dotimes (i 20) (insert (format "line %d\n" (1+ i)))))
          (parley-test--update
           (json-serialize
            (list :sessionUpdate "tool_call" :toolCallId "r1" :title "Read src/app.py:10-12"
                  :kind "read" :status "pending"
                  :locations (vector (list :path (expand-file-name "src/app.py" root) :line 10)
                                     (list :path "README.md")))))
          ;; The locations: a line below the title, relative to the workspace.
          (should (string-match-p "▸ Read src/app.py:10-12 \\[pending\\]\n    src/app.py:10  README.md\n\\'"
                                  (parley-test--visible-transcript)))
          (let ((pos (parley-test--pos "src/app.py:10  ")))
            (should (eq (get-text-property pos 'face) 'parley-location))
            (should (eq (lookup-key (get-text-property pos 'keymap) (kbd "RET"))
                        #'parley-open-location))
            ;; TAB on that line still folds the section.
            (should (eq (parley--section-at pos) (gethash '(tool . "r1") parley--blocks)))
            ;; RET on the button opens the file at the line.
            (should-not (parley-test--type (current-buffer) "RET" pos))
            (let ((file (get-file-buffer (expand-file-name "src/app.py" root))))
              (should (eq (window-buffer (selected-window)) file))
              (with-current-buffer file
                (should (= (line-number-at-pos) 10))
                (should (looking-at "line 10$")))
              (kill-buffer file)))
          ;; An update without locations keeps them.
          (parley-test--update
           "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"r1\",\"status\":\"completed\"}")
          (should (string-match-p "\\[done\\]\n    src/app.py:10  README.md\n\\'"
                                  (parley-test--visible-transcript))))
      (delete-directory root t))))

(ert-deftest parley-tool-call-diff-content ()
  (parley-test--with-chat
    (parley-test--update
     (json-serialize
      (list :sessionUpdate "tool_call" :toolCallId "e1" :title "Edit notes.txt" :kind "edit"
            :status "pending"
            :content (vector (list :type "diff" :path "notes.txt"
                                   :oldText "one\ntwo\nthree\n" :newText "one\nTWO\nthree\n")))))
    (goto-char (parley-test--pos "Edit notes.txt"))
    (parley-tab)
    (should (string-match-p
             ;; An edit: its line counts the lines; its body is the diff.
             (concat "▾ Edit notes.txt \\+1 −1 \\[pending\\]\n"
                     "    --- notes.txt\n    \\+\\+\\+ notes.txt\n    @@ -1,3 \\+1,3 @@\n"
                     "     one\n    -two\n    \\+TWO\n     three\n\\'")
             (parley-test--visible-transcript)))
    (should (eq (get-text-property (parley-test--pos "-two") 'face) 'diff-removed))
    (should (eq (get-text-property (parley-test--pos "+TWO") 'face) 'diff-added))
    (should (eq (get-text-property (parley-test--pos "@@ -1,3") 'face) 'diff-hunk-header))))

(ert-deftest parley-tool-call-superseded-is-dim-not-failed ()
  (parley-test--with-chat
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"s1\",\"title\":\"Read a.py\",\"kind\":\"read\",\"status\":\"pending\"}")
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"s1\",\"status\":\"failed\",\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"The model did not make this call after all.\"}}],\"_meta\":{\"parley\":{\"superseded\":true}}}")
    (should (string-match-p "▸ Read a.py \\[superseded\\]\n\\'" (parley-test--visible-transcript)))
    (should-not (string-match-p "failed" (parley-test--visible-transcript)))
    (should (eq (get-text-property (parley-test--pos "superseded") 'face) 'parley-tool-superseded))
    (should (eq (get-text-property (parley-test--pos "Read a.py") 'face) 'parley-tool-superseded))
    (should (string-match-p "did not make this call" (parley-test--transcript)))))

(ert-deftest parley-revision-replaces-streamed-text ()
  (parley-test--with-chat
    (parley-test--chunk "I will read the fil" "m1")
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"t1\",\"title\":\"read_file\",\"kind\":\"read\",\"status\":\"pending\"}")
    (parley-test--update
     "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"I will read the file first.\"},\"messageId\":\"m1b\",\"_meta\":{\"parley\":{\"replaces\":\"m1\"}}}")
    (should (string-match-p "Parley\nI will read the file first\\.\n▸ read_file \\[pending\\]\n\\'"
                            (parley-test--transcript)))
    (should-not (string-match-p "fil\n" (parley-test--transcript)))
    ;; The tool call still updates in place after the revision.
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"t1\",\"status\":\"completed\"}")
    (should (string-match-p "first\\.\n▸ read_file \\[done\\]\n\\'" (parley-test--transcript)))))

(ert-deftest parley-revision-of-last-block ()
  (parley-test--with-chat
    (parley-test--chunk "Helo wrld" "m1")
    (parley-test--update
     "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"Hello world\"},\"messageId\":\"m1\",\"_meta\":{\"parley\":{\"replaces\":\"m1\"}}}")
    (should (string-suffix-p "Parley\nHello world" (parley-test--transcript)))
    (should (equal (buffer-substring-no-properties parley--output (point-max))
                   (concat "\n" parley-prompt-string)))))

(ert-deftest parley-errors-and-stop-reasons ()
  (parley-test--with-chat
    (setq parley--busy t)
    (parley-test--chunk "partial" "m1")
    (parley--turn-failed '(:code -32001 :message "The provider said no (429)."
                                 :data (:provider "openai" :status 429)))
    (should-not parley--busy)
    (let ((pos (parley-test--pos "Error: The provider said no")))
      (should pos)
      (should (eq (get-text-property pos 'face) 'parley-error)))
    (should (string-match-p "partial\nError: .*provider openai, status 429" (parley-test--transcript)))
    ;; Why a turn stopped is the server's notice, shown where it comes;
    ;; the prompt's result adds nothing (no stop table in the client).
    (setq parley--busy t)
    (parley-test--notice "Stopped." "info")
    (parley--turn-done '(:stopReason "cancelled"))
    (should (string-match-p "\nStopped\\.\n\\'" (parley-test--transcript)))
    (should (eq (get-text-property (parley-test--pos "Stopped.") 'face) 'parley-notice))
    (setq parley--busy t)
    (parley-test--notice "Stopped: the turn reached its limit of 25 model requests." "warning")
    (parley--turn-done '(:stopReason "max_turn_requests"))
    (should (string-match-p "\nStopped: the turn reached its limit of 25 model requests\\.\n\\'"
                            (parley-test--transcript)))
    (should (eq (get-text-property (parley-test--pos "Stopped: the turn") 'face) 'parley-warning))
    (setq parley--busy t)
    (parley-test--notice "The model could not go on." "error")
    (parley--turn-done '(:stopReason "refusal"))
    (should (eq (get-text-property (parley-test--pos "The model could not") 'face) 'parley-error))
    ;; A stop with no notice shows nothing of the client's own.
    (let ((before (parley-test--transcript)))
      (setq parley--busy t)
      (parley--turn-done '(:stopReason "max_tokens"))
      (should (equal (parley-test--transcript) before)))))

(ert-deftest parley-notice-shown-once-where-it-comes-not-as-answer ()
  ;; A chunk with `_meta.parley.notice': a notice line at its level,
  ;; where it comes, never answer text; said once, whatever the result.
  (parley-test--with-chat
    (setq parley--busy t)
    (parley-test--chunk "Reading." "m1")
    (parley-test--notice
     "This session spent $0.5600 of its $0.50 budget, so the turn stops here." "warning"
     "msg_2")
    ;; The answer's block holds the answer only; the notice is no block.
    (let ((answer (gethash '(message . "m1") parley--blocks)))
      (should (equal (buffer-substring-no-properties (parley--block-beg answer)
                                                     (parley--block-end answer))
                     "Reading."))
      (should-not (gethash '(message . "msg_2") parley--blocks)))
    ;; The answer goes on after it (a chunk of the same message): a new block.
    (parley-test--chunk "More." "m1")
    (parley--turn-done
     '(:stopReason "max_turn_requests"
       :_meta (:parley (:stopText "Stopped: this session's budget of $0.50 is spent ($0.5600 so far)."))))
    (should (string-suffix-p
             "Parley\nReading.\nThis session spent $0.5600 of its $0.50 budget, so the turn stops here.\nMore.\n"
             (parley-test--transcript)))
    (should (= 1 (how-many "This session spent" parley--start parley--output)))
    (should-not (string-match-p "Stopped: this session's budget" (parley-test--transcript)))
    (should (eq (get-text-property (parley-test--pos "This session spent") 'face)
                'parley-warning))
    ;; The next prompt, refused before it started: its one notice.
    (setq parley--busy t)
    (parley-test--notice
     "This session spent $0.5600 of its $0.50 budget, so this prompt was not sent." "warning")
    (parley--turn-done '(:stopReason "refusal"))
    (should (string-suffix-p "\nThis session spent $0.5600 of its $0.50 budget, so this prompt was not sent.\n"
                             (parley-test--transcript)))))

(ert-deftest parley-notice-of-unknown-level-is-info ()
  (parley-test--with-chat
    (parley-test--notice "Something to know." "loud")
    (should (eq (get-text-property (parley-test--pos "Something to know.") 'face)
                'parley-notice))
    ;; A notice folds the thoughts before it, as an answer does.
    (parley-test--chunk "Pondering." "t1" "agent_thought_chunk")
    (parley-test--notice "Stopped." "info")
    (should (string-match-p "▸ Thinking\nStopped\\.\n\\'" (parley-test--visible-transcript)))))

(ert-deftest parley-replayed-user-messages ()
  (parley-test--with-chat
    (parley-test--chunk "What is 2+2?" nil "user_message_chunk")
    (parley-test--chunk "4." "m1")
    (parley-test--chunk "And 3+3?" nil "user_message_chunk")
    (parley-test--chunk "6." "m2")
    (should (equal (parley-test--transcript)
                   "You\nWhat is 2+2?\n\nParley\n4.\n\nYou\nAnd 3+3?\n\nParley\n6."))
    (should (eq (get-text-property (parley-test--pos "You") 'face) 'parley-user-header))))

(ert-deftest parley-replayed-prompts-in-a-row-stay-apart ()
  ;; Two stored prompts with no answer between them (the first turn
  ;; failed early), and one prompt sent as two chunks.
  (parley-test--with-chat
    (parley-test--chunk "First" "user_0" "user_message_chunk")
    (parley-test--chunk "Second, " "user_1" "user_message_chunk")
    (parley-test--chunk "continued" "user_1" "user_message_chunk")
    (parley-test--chunk "Answer." "m1")
    (should (equal (parley-test--transcript)
                   "You\nFirst\n\nYou\nSecond, continued\n\nParley\nAnswer."))))

(ert-deftest parley-header-line-shows-model-usage-busy ()
  (parley-test--with-chat
    (setq parley--model "openai:gpt-4.1-mini" parley--busy t)
    (parley-test--update (parley-test--usage-update 1200 100 100 20 0.0021 128000))
    (let ((line (parley--header-line)))
      (should (string-match-p "openai:gpt-4.1-mini" line))
      (should (string-match-p "tokens 100 in / 20 out" line))
      (should (string-match-p "\\$0.0021" line))
      (should (string-match-p "context 1.2k/128k (1%)" line))
      ;; The status first: a narrow window cuts off the end, not it.
      (should (string-prefix-p " ● working  Parley" line))
      ;; The mode line too (format-mode-line gives "" in batch: its parts).
      (should (equal mode-name (quote ("Parley" (:eval (parley--mode-line-status))))))
      (should (equal (parley--mode-line-status) " ●working"))
      (should (string-match-p "working" line)))
    (parley--turn-done '(:stopReason "end_turn"
                         :_meta (:parley (:turn (:model "openai:gpt-4.1")
                                          :session (:inputTokens 100 :outputTokens 20 :turns 1)))))
    (let ((line (parley--header-line)))
      (should (string-match-p "openai:gpt-4.1 " line))
      (should (string-match-p "tokens 100 in / 20 out  \\$0.0021  1 turn" line))
      (should-not (string-match-p "working" line)))))

(ert-deftest parley-prompt-history ()
  (parley-test--with-chat
    (setq parley--history '("second" "first"))
    (goto-char (point-max))
    (insert "draft")
    (parley-previous-input 1)
    (should (equal (parley--current-input) "second"))
    (parley-previous-input 1)
    (should (equal (parley--current-input) "first"))
    (should-error (parley-previous-input 1) :type 'user-error)
    (parley-next-input 1)
    (should (equal (parley--current-input) "second"))
    (parley-next-input 1)
    (should (equal (parley--current-input) "draft"))))

(ert-deftest parley-send-renders-prompt-and-requests ()
  (parley-test--with-chat
    (let (sent)
      (cl-letf (((symbol-function 'parley--prompt)
                 (lambda (blocks) (setq sent blocks))))
        (goto-char (point-max))
        (insert "Explain this")
        (parley-return)
        (should (equal sent '((:type "text" :text "Explain this"))))
        (should (equal (parley--current-input) ""))
        (should (string-match-p "You\nExplain this\n\\'" (parley-test--transcript)))
        ;; After a turn that failed before any answer, the next prompt
        ;; still gets its own label.
        (parley--turn-failed '(:code -32001 :message "no"))
        (goto-char (point-max))
        (insert "Retry")
        (parley-send)
        (should (string-match-p "You\nExplain this\nError: no\n\nYou\nRetry\n\\'"
                                (parley-test--transcript)))
        (should (equal parley--history '("Retry" "Explain this")))
        ;; RET in the middle of the prompt is a newline.
        (insert "two")
        (backward-char 1)
        (parley-return)
        (should (equal (parley--current-input) "tw\no"))))))

(ert-deftest parley-context-goes-as-resource ()
  (let ((source (generate-new-buffer "parley-source")))
    (unwind-protect
        (parley-test--with-chat
          (with-current-buffer source (insert "line one\nline two\n"))
          (let ((chat (current-buffer)) sent)
            (cl-letf (((symbol-function 'parley--prompt)
                       (lambda (blocks) (setq sent blocks)))
                      ((symbol-function 'parley--chat-buffer-for-current)
                       (lambda () chat)))
              (parley-add-buffer source)
              (should (string-match-p "+1 context" (parley--header-line)))
              (goto-char (point-max))
              (insert "Summarize")
              (parley-send)
              (should (equal (car sent)
                             '(:type "resource"
                                     :resource (:uri "buffer://parley-source"
                                                     :text "line one\nline two\n"
                                                     :mimeType "text/plain"))))
              (should (equal (cadr sent) '(:type "text" :text "Summarize")))
              (should (string-match-p "\\[context: buffer://parley-source\\]\nSummarize"
                                      (parley-test--transcript)))
              ;; A region.
              (with-current-buffer source
                (setq parley--busy nil)
                (let ((beg (point-min)) (end (save-excursion (goto-char (point-min))
                                                             (line-end-position))))
                  (parley-send-region beg end "What is it?")))
              (should (equal (plist-get (plist-get (car sent) :resource) :text) "line one"))
              (should (string-match-p "#L1-L1" (plist-get (plist-get (car sent) :resource) :uri))))))
      (kill-buffer source))))

(ert-deftest parley-window-follows-only-at-end ()
  (parley-test--with-chat
    (set-window-buffer (selected-window) (current-buffer))
    (goto-char (point-max))
    (dotimes (i 50) (parley-test--chunk (format "line %d\n" i)))
    (should (= (window-point) (point-max)))
    ;; The user moves up into the transcript: it stays where it is.
    (goto-char (parley-test--pos "line 10"))
    (let ((pos (point)))
      (dotimes (i 50) (parley-test--chunk (format "more %d\n" i)))
      (should (= (window-point) pos))
      (should (looking-at "line 10")))))

(ert-deftest parley-streaming-keeps-marker-count-flat ()
  ;; The streaming path must not leave a marker (or anything else) per chunk.
  (parley-test--with-chat
    (parley-test--chunk "start" "m1")
    (let ((blocks (hash-table-count parley--blocks)))
      (dotimes (_ 2000) (parley-test--chunk "x" "m1"))
      (should (= blocks (hash-table-count parley--blocks))))
    ;; Nor a text-property interval per chunk: they join the one before.
    (let ((changes 0) (pos parley--start))
      (while (< pos parley--output)
        (setq pos (next-property-change pos nil parley--output)
              changes (1+ changes)))
      (should (< changes 5)))
    (parley--end-turn-state)
    (should (= 0 (hash-table-count parley--blocks)))))

(ert-deftest parley-json-brief-with-and-without-native-json ()
  (let ((value '(:path "a.txt" :flags [1 2] :deep :json-false)))
    (should (equal (parley--json-brief value) "{\"path\":\"a.txt\",\"flags\":[1,2],\"deep\":false}"))
    ;; An Emacs built without libjansson: json.el does it.
    (cl-letf (((symbol-function 'json-serialize) nil))
      (should (equal (parley--json-brief value) "{\"path\":\"a.txt\",\"flags\":[1,2],\"deep\":false}")))
    (should (equal (parley--json-brief "plain") "plain"))
    (should (equal (parley--json-brief "abcdef" 3) "abc…"))))

(defmacro parley-test--with-fake-server (results &rest body)
  "Run BODY with requests answered from RESULTS, an alist (METHOD . RESULT).
`requests' is bound to the requests sent, newest first, as (METHOD . PARAMS).
A RESULT that is a function is called with the params; one that is
\(error . ERR) is the error ERR."
  (declare (indent 1) (debug t))
  (let ((table (make-symbol "results")))
    `(let ((parley--connection 'fake-connection)
           (,table ,results)
           (requests nil))
       (cl-letf* ((answer (lambda (method params)
                            (push (cons method params) requests)
                            (let ((result (cdr (assq method ,table))))
                              (if (functionp result) (funcall result params) result))))
                  ((symbol-function 'parley--live-connection) (lambda () 'fake-connection))
                  ((symbol-function 'jsonrpc-running-p) (lambda (_) t))
                  ((symbol-function 'jsonrpc-notify)
                   (lambda (_conn method params) (push (cons method params) requests)))
                  ((symbol-function 'parley--request)
                   (lambda (_conn method params) (funcall answer method params)))
                  ((symbol-function 'jsonrpc-async-request)
                   (lambda (_conn method params &rest args)
                     (let ((result (funcall answer method params)))
                       (if (eq (car-safe result) 'error)
                           (funcall (plist-get args :error-fn) (cdr result))
                         (when (plist-get args :success-fn)
                           (funcall (plist-get args :success-fn) result)))))))
                 ,@body))))

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

;;;; Emacs tools

(ert-deftest parley-tool-specs-serialize ()
  (let ((json (json-serialize (parley--initialize-params)
                              :null-object nil :false-object :json-false)))
    (should (string-match-p "\"name\":\"elisp_eval\"" json))
    (should (string-match-p "\"needsPermission\":true" json))
    ;; Parley's own client asks for hybrid revisions.
    (should (string-match-p "\"_meta\":{\"parley\":{.*\"revisions\":true" json))
    (should (string-match-p "\"buffer_list\".*\"properties\":{}" json))))

(ert-deftest parley-tools-elisp-eval ()
  (let ((parley-allow-elisp-eval nil))
    (should (equal (parley-tools-call "elisp_eval" '(:code "(+ 1 2)") t)
                   '(:content "3" :isError :json-false)))
    (should (equal (plist-get (parley-tools-call "elisp_eval"
                                                 '(:code "(princ \"hi\") (list 1 2)") t)
                              :content)
                   "hi\n=> (1 2)"))
    (let ((result (parley-tools-call "elisp_eval" '(:code "(car 1)") t)))
      (should (eq (plist-get result :isError) t))
      (should (string-match-p "wrong-type-argument\\|Wrong type" (plist-get result :content))))
    ;; Not approved: nothing is evaluated (parley.el asks first).
    (let ((parley-test--ran nil))
      (defvar parley-test--ran)
      (let ((result (parley-tools-call "elisp_eval" '(:code "(setq parley-test--ran t)"))))
        (should (eq (plist-get result :isError) t))
        (should-not parley-test--ran)))
    (let ((parley-allow-elisp-eval t))
      (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) (error "Asked"))))
        (should (equal (plist-get (parley-tools-call "elisp_eval" '(:code "(* 6 7)")) :content)
                       "42"))))))

(ert-deftest parley-tools-describe-and-buffers ()
  (let ((content (plist-get (parley-tools-call "elisp_describe" '(:symbol "car")) :content)))
    (should (string-match-p "car is a built-in function" content)))
  (let ((content (plist-get (parley-tools-call "elisp_describe"
                                               '(:symbol "fill-column" :kind "variable"))
                            :content)))
    (should (string-match-p "fill-column" content)))
  (should (eq t (plist-get (parley-tools-call "elisp_describe" '(:symbol "no-such-symbol-xyzzy"))
                           :isError)))
  (let ((buffer (get-buffer-create "parley-tools-test")))
    (unwind-protect
        (progn
          (with-current-buffer buffer (insert "one\ntwo\nthree\n"))
          (should (string-match-p "^parley-tools-test\t"
                                  (plist-get (parley-tools-call "buffer_list" nil) :content)))
          (should (equal (plist-get (parley-tools-call "buffer_read" '(:buffer "parley-tools-test"))
                                    :content)
                         "one\ntwo\nthree\n"))
          (should (equal (plist-get (parley-tools-call "buffer_read"
                                                       '(:buffer "parley-tools-test"
                                                                 :startLine 2 :endLine 2))
                                    :content)
                         "two\n"))
          (let ((parley-tool-output-limit 5))
            (should (string-match-p "\\`one\nt\n\\[truncated: 5 of 14"
                                    (plist-get (parley-tools-call "buffer_read"
                                                                  '(:buffer "parley-tools-test"))
                                               :content)))))
      (kill-buffer buffer)))
  (should (eq t (plist-get (parley-tools-call "no_such_tool" nil) :isError))))

;; A tool defined by the tests, and removed again by each.
(defvar parley-test--tool-calls nil)

(defun parley-test--forget-tool (name)
  "Remove the Emacs tool NAME that a test defined."
  (setq parley-tools--tools
        (cl-remove name parley-tools--tools
                   :key #'parley-tools--tool-name :test #'equal)))

(ert-deftest parley-tools-define-registers-spec-and-function ()
  (unwind-protect
      (progn
        (parley-tools-define parley_test_echo
            ((text string "What to echo." :required t)
             (times integer nil :name "repeatTimes")
             (tone string nil :enum ("calm" "loud")))
          "Echo TEXT."
          :kind "read"
          (push (list text times tone) parley-test--tool-calls)
          (concat (apply #'concat (make-list (or times 1) text)) (or tone "")))
        ;; The spec the server sees, with the schema from the arguments.
        (let ((spec (cl-find "parley_test_echo" (parley-tools-specs)
                             :key (lambda (s) (plist-get s :name)) :test #'equal)))
          (should (equal (json-serialize spec :null-object nil :false-object :json-false)
                         (concat "{\"name\":\"parley_test_echo\",\"description\":\"Echo TEXT.\","
                                 "\"inputSchema\":{\"type\":\"object\",\"properties\":"
                                 "{\"text\":{\"type\":\"string\",\"description\":\"What to echo.\"},"
                                 "\"repeatTimes\":{\"type\":\"integer\"},"
                                 "\"tone\":{\"type\":\"string\",\"enum\":[\"calm\",\"loud\"]}},"
                                 "\"required\":[\"text\"]},"
                                 "\"kind\":\"read\",\"needsPermission\":false}"))))
        ;; Its function, with the arguments checked as declared.
        (should (equal (parley-tools-call "parley_test_echo" '(:text "ab" :repeatTimes 2))
                       '(:content "abab" :isError :json-false)))
        (dolist (case '(((:repeatTimes 2) . "Argument `text' must be a string")
                        ((:text "a" :repeatTimes "2") . "Argument `repeatTimes' must be an integer")
                        ((:text "a" :tone "shrill") . "Argument `tone' must be one of calm, loud")))
          (let ((result (parley-tools-call "parley_test_echo" (car case))))
            (should (eq (plist-get result :isError) t))
            (should (equal (format-message (cdr case)) (plist-get result :content)))))
        (should (= (length parley-test--tool-calls) 1))
        ;; Defined again, it replaces the first definition, in its place.
        (let ((names (mapcar (lambda (s) (plist-get s :name)) (parley-tools-specs))))
          (parley-tools-define parley_test_echo () "Echo nothing." "")
          (should (equal (mapcar (lambda (s) (plist-get s :name)) (parley-tools-specs)) names))
          (should (equal (plist-get (parley-tools-call "parley_test_echo" nil) :content) ""))))
    (parley-test--forget-tool "parley_test_echo")))

(ert-deftest parley-tools-rejected-call-never-runs ()
  ;; The user's "no" holds even when `parley-allow-elisp-eval' allows
  ;; unasked calls.
  (let ((parley-allow-elisp-eval t)
        (parley-test--ran nil))
    (defvar parley-test--ran)
    (let ((result (parley-tools-call "elisp_eval" '(:code "(setq parley-test--ran t)")
                                     'rejected)))
      (should (eq (plist-get result :isError) t))
      (should (string-match-p "did not allow" (plist-get result :content)))
      (should-not parley-test--ran))))

(ert-deftest parley-usage-shows-server-totals-never-sums ()
  ;; The header line shows the session's totals exactly as the last
  ;; report gave them: the calls' own usage (10, 20) is never added up,
  ;; and totals that are not its sum prove it.  A turn's end asks the
  ;; server nothing.
  (parley-test--with-fake-server
      `((session/prompt
         . ,(lambda (_params)
              (parley-test--update (parley-test--usage-update 20 10 1000 50 0.5 1000))
              (should (string-match-p "tokens 1.0k in / 50 out  \\$0.5000  4 turns  context 20/1.0k (2%)"
                                      (parley--header-line)))
              (parley-test--update (parley-test--usage-update 1264 20 777 66 0.75))
              (let ((line (parley--header-line)))
                (should (string-match-p "tokens 777 in / 66 out  \\$0.7500  4 turns  context 1.3k\\'"
                                        line))
                ;; No window is shown when the server does not know it.
                (should-not (string-match-p "1.3k/" line)))
              (parley-test--json
               "{\"stopReason\":\"end_turn\",\"_meta\":{\"parley\":{\"usage\":{\"inputTokens\":30,\"outputTokens\":2},\"turn\":{\"rounds\":2,\"model\":\"anthropic:claude-sonnet-4-5\",\"cost\":{\"amount\":0.002,\"currency\":\"USD\"}},\"session\":{\"inputTokens\":4300,\"outputTokens\":200,\"cost\":{\"amount\":0.0126,\"currency\":\"USD\"},\"turns\":5,\"rounds\":11}}}}"))))
    (parley-test--with-chat
      (setq parley--conn 'fake-connection)
      (should (string-match-p "tokens 0 in / 0 out" (parley--header-line)))
      (should-not (string-match-p "turn\\|\\$" (parley--header-line)))
      (goto-char (point-max))
      (insert "Count")
      (parley-send)
      (should (equal (mapcar #'car (reverse requests)) '(session/prompt)))
      (let ((line (parley--header-line)))
        (should (string-match-p "anthropic:claude-sonnet-4-5" line))
        ;; The prompt result's session totals, not the turn's nor a sum.
        (should (string-match-p "tokens 4.3k in / 200 out  \\$0.0126  5 turns  context 1.3k" line))
        (should-not (string-match-p "working" line))))))

(ert-deftest parley-with-live-buffer-skips-killed-buffers ()
  (let ((buffer (generate-new-buffer " parley-test-live")))
    (should (eq (parley--with-live-buffer buffer (current-buffer)) buffer))
    (kill-buffer buffer)
    (let ((ran nil))
      (should-not (parley--with-live-buffer buffer (setq ran t)))
      (should-not ran))))

;;;; Server requests answered later, over a loopback

(defmacro parley-test--with-loopback (&rest body)
  "Run BODY with `conn' bound to a `parley--connection' talking to itself.
A `cat' process echoes what Emacs sends, so each request comes back
as a request from the \"server\" and each reply as its response."
  (declare (indent 0) (debug t))
  `(let ((conn (make-instance
                'parley--rpc-connection
                :name "parley-loopback"
                :process (lambda ()
                           (make-process :name "parley-loopback" :command '("cat")
                                         :connection-type 'pipe :coding 'utf-8-emacs-unix
                                         :noquery t
                                         :stderr (get-buffer-create "*parley-loopback stderr*")))
                :request-dispatcher #'parley--handle-request
                :notification-dispatcher #'parley--handle-notification
                :on-shutdown #'ignore
                ,@(parley--events-initargs))))
     (unwind-protect (progn ,@body)
       (setf (parley--expected-exit conn) t)
       (jsonrpc-shutdown conn))))

(ert-deftest parley-deferred-reply-to-call-tool ()
  (parley-test--with-loopback
    (let ((result (jsonrpc-request conn '_parley/editor/callTool
                                   '(:sessionId "x" :toolCallId "c1" :name "elisp_describe"
                                                :arguments (:symbol "car"))
                                   :timeout 10)))
      (should (string-match-p "built-in function" (plist-get result :content)))
      (should (eq (plist-get result :isError) :json-false)))))

;;;; Permission questions, asked inline

(defconst parley-test--permission
  '(:sessionId "sess-unit"
               :toolCall (:toolCallId "call_9" :title "python_eval" :kind "execute"
                                      :rawInput (:code "import os\nos.remove('precious.txt')"))
               :options [(:optionId "allow" :name "Allow once" :kind "allow_once")
                         (:optionId "always" :name "Allow always" :kind "allow_always")
                         (:optionId "reject" :name "Reject" :kind "reject_once")])
  "A permission request as the server sends it.")

(defun parley-test--wait (predicate)
  "Wait up to 10 seconds for PREDICATE; fail the test if it stays nil."
  (let ((deadline (+ (float-time) 10)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.02))
    (should (funcall predicate))))

(defun parley-test--request (conn method params)
  "Send METHOD with PARAMS on CONN; return a cons whose car becomes its answer."
  (let ((answer (list 'pending)))
    (jsonrpc-async-request conn method params
                           :timeout 20
                           :success-fn (lambda (result) (setcar answer result))
                           :error-fn (lambda (err) (setcar answer (list 'error err))))
    answer))

(defun parley-test--settle ()
  "Let the loopback deliver what is in flight."
  (dotimes (_ 10) (accept-process-output nil 0.02)))

(defun parley-test--type (buffer keys &optional pos)
  "Type KEYS as the user would, in BUFFER shown in the selected window.
With POS, point goes there first.  Return the error a command
signalled, or nil."
  (set-window-buffer (selected-window) buffer)
  (when pos (set-window-point (selected-window) pos))
  (prog1 (condition-case err (progn (execute-kbd-macro (kbd keys)) nil)
           (error err))
    (set-buffer buffer)))

(defmacro parley-test--no-minibuffer (&rest body)
  "Run BODY failing the test if anything reads the minibuffer."
  (declare (indent 0) (debug t))
  `(cl-letf (((symbol-function 'completing-read) (lambda (&rest _) (error "Minibuffer read")))
             ((symbol-function 'read-from-minibuffer) (lambda (&rest _) (error "Minibuffer read")))
             ((symbol-function 'y-or-n-p) (lambda (&rest _) (error "Minibuffer read")))
             ((symbol-function 'yes-or-no-p) (lambda (&rest _) (error "Minibuffer read"))))
     ,@body))

(defun parley-test--question-pos ()
  "Return a position inside the pending question of the current buffer."
  (1+ (overlay-start (parley--question-overlay (car parley--questions)))))

(ert-deftest parley-permission-asked-inline-answered-only-by-its-keys ()
  (let ((elsewhere (generate-new-buffer "parley-elsewhere")))
    (unwind-protect
        (parley-test--with-chat
          (let ((chat (current-buffer)))
            (set-window-buffer (selected-window) elsewhere)
            (parley-test--with-loopback
              (parley-test--no-minibuffer
                (let ((answer (parley-test--request conn 'session/request_permission
                                                    parley-test--permission)))
                  (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
                  (with-current-buffer chat
                    ;; The question shows the tool and its code in full, and the keys.
                    (should (string-match-p
                             (concat "Parley asks permission: python_eval (execute)\n"
                                     "    import os\n    os.remove('precious.txt')\n"
                                     "  \\[y\\] Allow once   \\[a\\] Allow always   \\[n\\] Reject\n")
                             (parley-test--visible-transcript)))
                    ;; Parley says it waits, and shows the buffer without selecting it.
                    (should (string-match-p "waiting for you" (parley--header-line)))
                    (should (string-match-p "waiting for you" mode-line-process))
                    (should (memq 'parley--waiting-text global-mode-string))
                    ;; Not first: a mode-line list that starts with a symbol
                    ;; is a conditional, shown as *invalid*.
                    (should-not (symbolp (car global-mode-string)))
                    (should (string-match-p "Parley: waiting for you" parley--waiting-text))
                    (should (get-buffer-window chat))
                    (should (eq (window-buffer (selected-window)) elsewhere)))
                  ;; y and RET typed in another buffer answer nothing.
                  (should-not (parley-test--type elsewhere "y RET a RET n RET"))
                  (should (equal (with-current-buffer elsewhere (buffer-string)) "y\na\nn\n"))
                  ;; Nor do the commands called there.
                  (with-current-buffer elsewhere
                    (should-error (parley-question-allow-once) :type 'user-error)
                    (should-error (parley-question-allow-always) :type 'user-error))
                  ;; In the chat buffer's prompt, y is a letter of the prompt.
                  (should-not (parley-test--type chat "y" (with-current-buffer chat (point-max))))
                  (should (equal (parley--current-input) "y"))
                  ;; In the question, RET only says which keys answer.
                  (should-not (parley-test--type chat "RET" (parley-test--question-pos)))
                  (parley-test--settle)
                  (should (eq (car answer) 'pending))
                  (should parley--questions)
                  ;; Sending a prompt meanwhile says where the question is.
                  (should-error (parley-send) :type 'user-error)
                  ;; y with point in the question allows this call once.
                  (should-not (parley-test--type chat "y" (parley-test--question-pos)))
                  (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
                  (should (equal (car answer) '(:outcome (:outcome "selected" :optionId "allow"))))
                  (should (eq (gethash "call_9" parley--approvals) 'once))
                  ;; The question collapsed to one line; nothing waits any more.
                  (should (string-match-p "Allowed once: python_eval\n\\'" (parley-test--transcript)))
                  (should-not (string-match-p "precious" (parley-test--transcript)))
                  (should (eq (get-text-property (parley-test--pos "Allowed once") 'face)
                              'parley-allowed))
                  (should-not parley--questions)
                  (should-not (string-match-p "waiting" (parley--header-line)))
                  (should-not (memq 'parley--waiting-text global-mode-string))
                  (should-not mode-line-process)
                  (should (equal (parley--current-input) "y")))))))
      (kill-buffer elsewhere))))

(ert-deftest parley-permission-not-answered-where-point-was ()
  ;; Point on the empty line at the end of the transcript, where the
  ;; question appears: a key typed there does not answer it.
  (parley-test--with-chat
    (let ((chat (current-buffer)))
      (parley-test--update
       "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"call_9\",\"title\":\"python_eval\",\"kind\":\"execute\",\"status\":\"pending\"}")
      (set-window-buffer (selected-window) chat)
      (goto-char parley--output)
      (set-window-point (selected-window) parley--output)
      (parley-test--with-loopback
        (let ((answer (parley-test--request conn 'session/request_permission
                                            parley-test--permission)))
          (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
          (should-not (parley--question-at (point)))
          (parley-test--type chat "y")
          (parley-test--settle)
          (should (eq (car answer) 'pending))
          (parley--cancel-questions))))))

(ert-deftest parley-permission-always-reject-and-click ()
  (parley-test--with-chat
    (let ((chat (current-buffer)))
      (parley-test--with-loopback
        (parley-test--no-minibuffer
          (pcase-dolist (`(,how ,option ,line)
                         '(("a" "always" "Allowed always: python_eval")
                           ("n" "reject" "Rejected: python_eval")
                           (click "reject" "Rejected: python_eval")))
            (let ((answer (parley-test--request conn 'session/request_permission
                                                parley-test--permission)))
              (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
              (if (stringp how)
                  (should-not (parley-test--type chat how (parley-test--question-pos)))
                ;; A click on a choice answers with it; a click elsewhere does not.
                (let ((click (lambda (pos)
                               (parley-question-click
                                (list 'mouse-1 (list (selected-window) pos '(0 . 0) 0
                                                     nil pos))))))
                  (set-window-buffer (selected-window) chat)
                  (funcall click (parley-test--question-pos))
                  (parley-test--settle)
                  (should (eq (car answer) 'pending))
                  (funcall click (parley-test--pos "[n] Reject"))))
              (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
              (should (equal (car answer) `(:outcome (:outcome "selected" :optionId ,option))))
              (should (string-match-p (concat (regexp-quote line) "\n\\'")
                                      (parley-test--transcript))))))
        (should (eq (gethash "call_9" parley--approvals) 'always))))))

(ert-deftest parley-permission-shows-content-and-diff ()
  (parley-test--with-chat
    (parley-test--with-loopback
      (let ((answer (parley-test--request
                     conn 'session/request_permission
                     (list :sessionId "sess-unit"
                           :toolCall
                           (list :toolCallId "e1" :title "Edit notes.txt" :kind "edit"
                                 :rawInput (list :path "notes.txt" :line 3)
                                 :content
                                 (vector
                                  '(:type "content" :content (:type "text" :text "Replace a line"))
                                  '(:type "diff" :path "notes.txt"
                                          :oldText "one\ntwo\nthree\nfour\nfive\nsix\n"
                                          :newText "one\ntwo\nthree\nFOUR\nfive\nsix\n")))
                           :options (vector '(:optionId "ok" :name "Allow" :kind "allow_once")
                                            '(:optionId "no" :name "Reject" :kind "reject_once"))))))
        (parley-test--wait (lambda () parley--questions))
        (should (string-match-p
                 (concat "Parley asks permission: Edit notes.txt (edit)\n"
                         "    {\n      \"path\": \"notes.txt\",\n      \"line\": 3\n    }\n"
                         "    Replace a line\n"
                         "    --- notes.txt\n    \\+\\+\\+ notes.txt\n    @@ -1,6 \\+1,6 @@\n"
                         "     one\n     two\n     three\n    -four\n    \\+FOUR\n"
                         "     five\n     six\n"
                         "  \\[y\\] Allow   \\[n\\] Reject   \\[d\\] Diff in a buffer\n")
                 (parley-test--transcript)))
        (should (eq (get-text-property (parley-test--pos "-four") 'face) 'diff-removed))
        ;; A new file.
        (should (equal (substring-no-properties (parley-diff-string "new.py" nil "a\nb\n" "    "))
                       "    --- /dev/null\n    +++ new.py\n    @@ -0,0 +1,2 @@\n    +a\n    +b\n"))
        (should (eq (get-text-property (parley-test--pos "+FOUR") 'face) 'diff-added))
        ;; No allow-always offered: `a' answers nothing.
        (should (parley-test--type (current-buffer) "a" (parley-test--question-pos)))
        (parley-test--settle)
        (should (eq (car answer) 'pending))
        (should-not (parley-test--type (current-buffer) "n" (parley-test--question-pos)))
        (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
        (should (equal (car answer) '(:outcome (:outcome "selected" :optionId "no"))))))))

(ert-deftest parley-permission-shows-code-content-once ()
  ;; A generic tool call: the code comes as `content'.  Shown in the
  ;; question, fontified; when it is also in `rawInput', only once.
  (parley-test--with-chat
    (parley-test--with-loopback
      (pcase-dolist (`(,id ,input) '(("c1" nil) ("c2" (:code "print(6 * 7)"))))
        (let ((answer (parley-test--request
                       conn 'session/request_permission
                       (list :sessionId "sess-unit"
                             :toolCall
                             (append (list :toolCallId id :title "Run Python" :kind "execute"
                                           :content (vector '(:type "content"
                                                                    :content (:type "text" :text "print(6 * 7)"))))
                                     (and input (list :rawInput input)))
                             :options (vector '(:optionId "ok" :name "Allow" :kind "allow_once")
                                              '(:optionId "no" :name "Reject" :kind "reject_once"))))))
          (parley-test--wait (lambda () parley--questions))
          (let ((text (parley-test--transcript)))
            (should (string-match-p
                     (concat "Parley asks permission: Run Python (execute)\n"
                             ;; The code once, as code: from the input or the content.
                             "    print(6 \\* 7)\n  \\[y\\] Allow   \\[n\\] Reject\n")
                     text))
            (should (= 1 (cl-count-if (lambda (l) (string-match-p "print" l))
                                      (split-string text "\n")))))
          ;; Fontified as Python.
          (should (eq (get-text-property (parley-test--pos "print(") 'face)
                      'font-lock-builtin-face))
          (should-not (parley-test--type (current-buffer) "n" (parley-test--question-pos)))
          (parley-test--wait (lambda () (not (eq (car answer) 'pending)))))))))

(ert-deftest parley-permission-cancelled-when-turn-ends-or-buffer-dies ()
  (parley-test--with-loopback
    (let ((sent nil))
      (cl-flet ((record (_conn &rest args)
                  (push (or (and (plist-get args :method)
                                 (format "%s" (plist-get args :method)))
                            (plist-get (plist-get (plist-get args :result) :outcome) :outcome))
                        sent)))
        (advice-add 'jsonrpc-connection-send :before #'record)
        (unwind-protect
            (progn
              ;; The turn ends (cancelled, timed out) while the question waits.
              (parley-test--with-chat
                (let ((answer (parley-test--request conn 'session/request_permission
                                                    parley-test--permission)))
                  (parley-test--wait (lambda () parley--questions))
                  (setq parley--busy t)
                  (parley-test--notice "Stopped." "info")
                  (parley--turn-done '(:stopReason "cancelled"))
                  (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
                  (should (equal (car answer) '(:outcome (:outcome "cancelled"))))
                  (should (string-match-p "Cancelled: python_eval\nStopped\\.\n\\'"
                                          (parley-test--transcript)))
                  (should-not parley--questions)))
              ;; The chat buffer is killed during the turn: the turn is
              ;; cancelled first, then the question.
              (let ((answer nil))
                (parley-test--with-chat
                  (setq parley--conn conn parley--busy t)
                  (setq answer (parley-test--request conn 'session/request_permission
                                                     parley-test--permission))
                  (parley-test--wait (lambda () parley--questions))
                  (setq sent nil))
                (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
                (should (equal (car answer) '(:outcome (:outcome "cancelled"))))
                (should (equal (cl-subseq (reverse sent) 0 2) '("session/cancel" "cancelled")))
                ;; Without a question, the turn is cancelled all the same.
                (setq sent nil)
                (parley-test--with-chat (setq parley--conn conn parley--busy t))
                (should (equal sent '("session/cancel")))
                (should-not (memq 'parley--waiting-text global-mode-string))))
          (advice-remove 'jsonrpc-connection-send #'record))))))

(ert-deftest parley-permission-without-chat-buffer-is-cancelled ()
  (parley-test--with-loopback
    (should (equal (jsonrpc-request conn 'session/request_permission
                                    (plist-put (copy-sequence parley-test--permission)
                                               :sessionId "no-such-session")
                                    :timeout 10)
                   '(:outcome (:outcome "cancelled"))))))

(ert-deftest parley-elisp-eval-approval ()
  (defvar parley-test--ran)
  (parley-test--with-chat
    (let ((chat (current-buffer))
          (parley-allow-elisp-eval nil)
          (parley-test--ran nil))
      (parley-test--with-loopback
        (parley-test--no-minibuffer
          (let ((call (lambda (id code)
                        (parley-test--request conn '_parley/editor/callTool
                                              (list :sessionId "sess-unit" :toolCallId id
                                                    :name "elisp_eval" :arguments (list :code code))))))
            ;; Approved in the server's question: Emacs does not ask again.
            (let ((answer (parley-test--request conn 'session/request_permission
                                                parley-test--permission)))
              (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
              (parley-test--type chat "y" (parley-test--question-pos))
              (parley-test--wait (lambda () (not (eq (car answer) 'pending)))))
            (let ((answer (funcall call "call_9" "(+ 1 2)")))
              (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
              (should (equal (car answer) '(:content "3" :isError :json-false))))
            ;; Not approved there (the server auto-approved it): Emacs asks,
            ;; inline too, and `n' does not evaluate.
            (let ((answer (funcall call "call_10" "(setq parley-test--ran t)")))
              (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
              (should (string-match-p "Emacs asks before it evaluates elisp_eval.*\n    (setq parley-test--ran t)\n  \\[y\\] Evaluate   \\[n\\] Do not evaluate"
                                      (parley-test--transcript)))
              (should-not (parley-test--type chat "n" (parley-test--question-pos)))
              (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
              (should (eq (plist-get (car answer) :isError) t))
              (should-not parley-test--ran))
            (let ((answer (funcall call "call_11" "(* 6 7)")))
              (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
              (should-not (parley-test--type chat "y" (parley-test--question-pos)))
              (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
              (should (equal (car answer) '(:content "42" :isError :json-false))))
            ;; Allow always in the server's question covers the later calls.
            (let ((answer (parley-test--request
                           conn 'session/request_permission
                           (plist-put (copy-tree parley-test--permission) :toolCall
                                      '(:toolCallId "call_12" :title "elisp_eval")))))
              (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
              (parley-test--type chat "a" (parley-test--question-pos))
              (parley-test--wait (lambda () (not (eq (car answer) 'pending)))))
            (dolist (id '("call_12" "call_13"))
              (let ((answer (funcall call id "(+ 2 2)")))
                (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
                (should (equal (car answer) '(:content "4" :isError :json-false)))))
            (should-not parley--questions)))))))

(ert-deftest parley-unknown-server-request-gets-error ()
  (parley-test--with-loopback
    (should-error (jsonrpc-request conn 'no/such_method nil :timeout 10)
                  :type 'jsonrpc-error)))

(provide 'parley-test)
;;; parley-test.el ends here
