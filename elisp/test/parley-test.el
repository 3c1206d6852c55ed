;;; parley-test.el --- Unit tests for parley.el  -*- lexical-binding: t; -*-

;;; Commentary:

;; The chat buffer fed with synthetic `session/update' notifications
;; (parsed from JSON exactly as jsonrpc.el delivers them): streaming,
;; revisions, tool calls, notices, usage.  No server needed.  Also the
;; helpers the other suites share: a chat buffer, a fake server that
;; answers requests from a table, a `cat' loopback connection, typing
;; keys as the user would.  The other unit suites:
;; parley-session-test.el, parley-tools-test.el,
;; parley-question-test.el, parley-edits-test.el,
;; parley-markdown-test.el, parley-display-test.el,
;; parley-structure-test.el.

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

;;;; Helpers of the suites that fake the server or loop back to Emacs

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

(defvar image-types)  ; Emacs's image types (unbound where Emacs has no image support)

;; A PNG of 1 x 1 pixel, as an evaluation's display would send it.
(defconst parley-test--png
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC")

(ert-deftest parley-tool-call-image-shown-where-the-frame-can ()
  "An image an evaluation displayed: in the tool call's output, the image itself
where Emacs can show it, else a line saying what it is."
  (let ((update (format "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"c1\",\"status\":\"completed\",\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"<Figure>\"}},{\"type\":\"content\",\"content\":{\"type\":\"image\",\"mimeType\":\"image/png\",\"data\":\"%s\"}}]}"
                        parley-test--png)))
    ;; Here (batch: no frame shows images): the line.
    (parley-test--with-chat
      (parley-test--update
       "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c1\",\"title\":\"python_eval\",\"kind\":\"execute\",\"status\":\"pending\"}")
      (parley-test--update update)
      (goto-char (parley-test--pos "python_eval"))
      (parley-tab)
      (should (string-match-p "  output:\n    <Figure>\n    \\[An image: image/png, 69 B\\]\n"
                              (parley-test--visible-transcript)))
      (should-not (get-text-property (parley-test--pos "[An image") 'display)))
    ;; A graphical frame that shows PNGs: the image, scaled to fit.
    (require 'image)  ; loaded now, so that it does not define the function back
    (cl-letf (((symbol-function 'display-images-p) (lambda (&rest _) t))
              ((symbol-function 'image-type-available-p) (lambda (type) (eq type 'png)))
              (image-types '(png)))
      (parley-test--with-chat
        (parley-test--update
         "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c1\",\"title\":\"python_eval\",\"kind\":\"execute\",\"status\":\"pending\"}")
        (parley-test--update update)
        (let ((image (get-text-property (parley-test--pos "[An image") 'display)))
          (should (eq (car image) 'image))
          (should (eq (plist-get (cdr image) :type) 'png))
          (should (equal (plist-get (cdr image) :data) (base64-decode-string parley-test--png)))
          (should (equal (plist-get (cdr image) :max-width) parley-image-max-width)))))))

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
    (let ((line (parley--header-text)))
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

(provide 'parley-test)
;;; parley-test.el ends here
