;;; parley-integration-test.el --- parley.el against the real server  -*- lexical-binding: t; -*-

;;; Commentary:

;; ERT tests that drive `parley serve' through the chat buffer, with
;; the fake LLM (`python -m parley.fakellm') answering from scripts.
;; The server is found in the project's virtualenv: $PARLEY_VENV, or
;; the .venv beside the elisp directory.  When the server is not
;; installed there the tests are skipped, saying why.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'url)
(require 'parley)
(require 'parley-test)                  ; typing keys as the user would
(require 'parley-test-env)

(defvar parley-it--missing 'unknown
  "Why the integration tests cannot run, or nil when they can.")

(defvar parley-it--fake nil
  "The fake LLM process.")

(defvar parley-it--url nil
  "The fake LLM's base URL.")

(defvar parley-it--home nil
  "PARLEY_HOME of the servers the tests start (one store for the run).")

(defvar parley-it--workspace nil
  "The workspace directory the sessions run in.")

(defun parley-it--check ()
  "Return why the server cannot be used, or nil when it can."
  (when (eq parley-it--missing 'unknown)
    (setq parley-it--missing (parley-test-env-missing)))
  parley-it--missing)

(defun parley-it--wait (predicate what &optional timeout)
  "Wait until PREDICATE returns non-nil, at most TIMEOUT seconds (default 20).
Fail the test, naming WHAT, when it does not."
  (let ((deadline (+ (float-time) (or timeout 20)))
        value)
    (while (and (not (setq value (funcall predicate)))
                (< (float-time) deadline))
      (accept-process-output nil 0.02))
    (or value (ert-fail (list "Timed out waiting for" what)))))

(defun parley-it--start-fake ()
  "Start the fake LLM unless it runs, and set `parley-it--url'."
  (unless (process-live-p parley-it--fake)
    (let ((fake (parley-test-env-start-fake "parley-fakellm")))
      (setq parley-it--fake (car fake)
            parley-it--url (cdr fake)))))

(defun parley-it--http (method path &optional body)
  "Send METHOD PATH with the JSON BODY to the fake LLM; return the parsed answer."
  (let* ((url-request-method method)
         (url-request-extra-headers '(("Content-Type" . "application/json")))
         (url-request-data (and body (encode-coding-string
                                      (json-serialize body :null-object :null
                                                      :false-object :json-false)
                                      'utf-8)))
         (url-show-status nil)
         (buffer (url-retrieve-synchronously (concat parley-it--url path) t t 20)))
    (unless buffer (error "No answer from the fake LLM for %s %s" method path))
    (unwind-protect
        (with-current-buffer buffer
          (goto-char (point-min))
          (unless (looking-at "HTTP/[0-9.]+ 200")
            (error "Fake LLM: %s" (buffer-string)))
          (re-search-forward "\r?\n\r?\n")
          (json-parse-string (decode-coding-string
                              (buffer-substring-no-properties (point) (point-max)) 'utf-8)
                             :object-type 'plist :null-object nil :false-object nil))
      (kill-buffer buffer))))

(defun parley-it--script (&rest replies)
  "Make REPLIES (plists in the fake LLM's script format) its script."
  (parley-it--http "POST" "/_fake/script" (vconcat replies)))

(defun parley-it--requests ()
  "Return the requests the fake LLM recorded, as a list of plists."
  (append (parley-it--http "GET" "/_fake/requests") nil))

(defun parley-it--clean-up ()
  "Delete the store and the workspace the tests made."
  (parley-shutdown)
  (dolist (dir (list parley-it--home parley-it--workspace))
    (when (and dir (file-directory-p dir))
      (delete-directory dir t))))

(defmacro parley-it--deftest (name doc &rest body)
  "Define the integration test NAME (DOC) running BODY with a fresh server.
BODY runs in a scratch workspace, with the server configured to use
the fake LLM.  The test is skipped when the server is not installed."
  (declare (indent 1) (doc-string 2))
  `(ert-deftest ,name ()
     ,doc
     (let ((missing (parley-it--check)))
       (when missing (ert-skip (concat "integration test skipped: " missing))))
     (parley-it--start-fake)
     (unless parley-it--home
       (setq parley-it--home (make-temp-file "parley-home-" t)
             parley-it--workspace (file-name-as-directory
                                   (make-temp-file "parley-workspace-" t)))
       (add-hook 'kill-emacs-hook #'parley-it--clean-up))
     (let* ((parley-server-command (list parley-test-env-parley "serve"))
            (parley-server-environment
             (parley-test-env-server-environment parley-it--url parley-it--home))
            (default-directory parley-it--workspace)
            (parley-turn-timeout 60))
       (unwind-protect
           (progn ,@body)
         (parley-shutdown)
         (dolist (buffer (parley--chat-buffers))
           (kill-buffer buffer))))))

(defun parley-it--transcript (&optional buffer)
  "Return the transcript of BUFFER (default the current buffer)."
  (with-current-buffer (or buffer (current-buffer))
    (buffer-substring-no-properties parley--start parley--output)))

(defun parley-it--send (text)
  "Type TEXT at the prompt and send it with RET."
  (goto-char (point-max))
  (insert text)
  (parley-return))

(defun parley-it--wait-idle (&optional timeout)
  "Wait up to TIMEOUT seconds for the turn in the current buffer to end."
  (let ((buffer (current-buffer)))
    (parley-it--wait (lambda () (not (buffer-local-value 'parley--busy buffer)))
                     "the end of the turn" timeout)))

(defun parley-it--send-failing (text &optional times)
  "Send TEXT to a provider failing it (HTTP 400), and wait for the end.
The provider fails TIMES requests (default 1)."
  (parley-it--script (list :text "never" :fault (list :kind "http" :status 400 :times (or times 1))))
  (parley-it--send text)
  (parley-it--wait-idle))

(defmacro parley-it--recording-methods (&rest body)
  "Run BODY with `sent' bound to the methods Emacs sends, newest first."
  (declare (indent 0) (debug t))
  `(let ((sent nil))
     (cl-flet ((record (_conn &rest args)
                 (when (plist-get args :method)
                   (push (intern (format "%s" (plist-get args :method))) sent))))
       (advice-add 'jsonrpc-connection-send :before #'record)
       (unwind-protect (progn ,@body)
         (advice-remove 'jsonrpc-connection-send #'record)))))

;;;; The tests

(parley-it--deftest parley-it-streamed-answer-in-order
  "A streamed answer appears in the buffer, in order, and the server's session totals are shown."
  (let ((words (mapconcat (lambda (i) (format "w%03d" i)) (number-sequence 1 60) " ")))
    (parley-it--script (list :text words :chunk_size 3 :usage [12 34]))
    (with-current-buffer (parley t)
      (parley-it--send "Count for me")
      (should parley--busy)
      (parley-it--wait-idle)
      (should (string-match-p (concat "You\nCount for me\n\nParley\n"
                                      (regexp-quote words) "\n\\'")
                              (parley-it--transcript)))
      (should (equal (parley--current-input) ""))
      (parley-it--wait (lambda () (string-match-p "tokens 12 in / 34 out" (parley--header-line)))
                       "usage in the header line")
      (should (string-match-p "openai:gpt-4.1-mini" (parley--header-line)))
      ;; A second turn: the server's session totals, and nothing asked
      ;; after the turn (no `_parley/usage').
      (parley-it--script (list :text "Again." :usage [12 34]))
      (parley-it--recording-methods
        (parley-it--send "Once more")
        (parley-it--wait-idle)
        (should (equal sent '(session/prompt))))
      (should (string-match-p "tokens 24 in / 68 out.*  2 turns" (parley--header-line))))))

(parley-it--deftest parley-it-thoughts-folded
  "Thoughts stream into a section that folds when the answer starts."
  (parley-it--script (list :thinking "First I consider the question." :text "The answer is 42."))
  (with-current-buffer (parley t)
    (parley-it--send "Think")
    (parley-it--wait-idle)
    (should (string-match-p "First I consider the question\\." (parley-it--transcript)))
    (let ((shown (parley-test--visible-transcript)))
      (should (string-match-p "▸ Thinking\nThe answer is 42\\." shown))
      (should-not (string-match-p "consider" shown)))
    (goto-char (point-min))
    (search-forward "Thinking")
    (parley-tab)
    (should (string-match-p "consider" (parley-test--visible-transcript)))))

(parley-it--deftest parley-it-budget-notice-once
  "A budget that stops, then refuses, a turn is said once each, as a warning notice."
  (let* ((config (make-temp-file "parley-budget-" nil ".toml" "[budget]\nsession_usd = 0.5\n"))
         (parley-server-environment (cons (concat "PARLEY_CONFIG=" config)
                                          parley-server-environment))
         (stops "This session spent $0.5600 of its $0.50 budget, so the turn stops here.")
         (refused "This session spent $0.5600 of its $0.50 budget, so this prompt was not sent"))
    (unwind-protect
        (progn
          (parley-it--script
           (list :text "Computing." :usage [1000000 100000]
                 :tool_calls (vector (list :name "python_eval" :arguments (list :code "6 * 7"))))
           (list :text "never"))
          (with-current-buffer (parley t)
            (parley-it--send "6 * 7?")
            (parley-it--wait-idle)
            (parley-it--send "More.")
            (parley-it--wait-idle)
            (let ((shown (parley-it--transcript)))
              (should (string-match-p (concat "Parley\nComputing\\.\n\\(?:.*\n\\)*"
                                              (regexp-quote stops))
                                      shown))
              (should (= 1 (how-many (regexp-quote stops) parley--start parley--output)))
              (should (= 1 (how-many (regexp-quote refused) parley--start parley--output)))
              ;; Not repeated as the results' stopText.
              (should-not (string-match-p "Stopped: this session's budget" shown))
              (should-not (string-match-p "Not started:" shown))
              (should-not (string-match-p "never" shown)))
            ;; Each at its level (warning), never in an answer's block.
            (should (eq (get-text-property (parley-test--pos stops) 'face) 'parley-warning))
            (should (eq (get-text-property (parley-test--pos refused) 'face) 'parley-warning))))
      (delete-file config))))

(parley-it--deftest parley-it-tool-round
  "A tool round shows the tool's header, its result, and the final answer."
  (with-temp-file (expand-file-name "notes.txt" parley-it--workspace)
    (insert "the secret is pineapple\n"))
  (parley-it--script
   (list :text "Let me look." :tool_calls (vector (list :name "read_file"
                                                        :arguments (list :path "notes.txt"))))
   (list :text "The file says pineapple."))
  (with-current-buffer (parley t)
    (parley-it--send "What is in notes.txt?")
    (parley-it--wait-idle)
    (let ((shown (parley-test--visible-transcript)))
      ;; Its name, or a title a person reads with the file as a location.
      (should (string-match-p "▸ \\(.*read_file.*\\|Read notes.txt\\) \\[done\\]\n" shown))
      (when (string-match-p "Read notes.txt" shown)
        (should (string-match-p "\\[done\\]\n    notes.txt\n" shown))
        (should (eq (get-text-property (+ 4 (parley-test--pos "    notes.txt")) 'face)
                    'parley-location)))
      (should (string-match-p "\\[done\\]\n\\(.\\|\n\\)*The file says pineapple\\.\n\\'" shown)))
    ;; The result is in the folded body.
    (should (string-match-p "pineapple\n\\(.\\|\n\\)*\\[done\\]\\|\\[done\\]\\(.\\|\n\\)*secret is pineapple"
                            (parley-it--transcript)))
    (goto-char (point-min))
    (re-search-forward "read_file\\|Read notes")
    (parley-tab)
    (should (string-match-p "secret is pineapple" (parley-test--visible-transcript)))))

(parley-it--deftest parley-it-read-file-sees-unsaved-buffer
  "read_file asks Emacs (fs/read_text_file): the model sees a buffer's unsaved text."
  (let* ((file (expand-file-name "draft.py" parley-it--workspace))
         (visiting (progn (with-temp-file file (insert "saved = 1\n"))
                          (find-file-noselect file))))
    (unwind-protect
        (progn
          (with-current-buffer visiting
            (goto-char (point-max))
            (insert "unsaved = 2\n"))
          (parley-it--script
           (list :tool_calls (vector (list :name "read_file"
                                           :arguments (list :path "draft.py"))))
           (list :text "I see it."))
          (with-current-buffer (parley t)
            (parley-it--send "Read draft.py")
            (parley-it--wait-idle)
            (should (string-match-p "I see it\\.\n\\'" (parley-it--transcript))))
          (let ((seen (car (last (parley-it--tool-messages)))))
            (should (string-match-p "saved = 1" seen))
            (should (string-match-p "unsaved = 2" seen)))
          ;; Emacs only read: the disk and the buffer are as they were.
          (should (buffer-modified-p visiting))
          (should (equal (with-temp-buffer (insert-file-contents file) (buffer-string))
                         "saved = 1\n")))
      (with-current-buffer visiting (set-buffer-modified-p nil))
      (kill-buffer visiting))))

(defun parley-it--question (&optional buffer)
  "Wait for a permission question in BUFFER (default the current one)."
  (let ((buffer (or buffer (current-buffer))))
    (parley-it--wait (lambda () (buffer-local-value 'parley--questions buffer))
                     "the permission question")))

(defun parley-it--answer (keys)
  "Type KEYS with point in the current buffer's pending question."
  (parley-it--question)
  (should-not (parley-test--type (current-buffer) keys (parley-test--question-pos))))

(defun parley-it--tool-messages ()
  "Return the contents of the tool results the model was sent, in order."
  (cl-loop for request in (parley-it--requests)
           append (cl-loop for message across (plist-get (plist-get request :body) :messages)
                           when (equal (plist-get message :role) "tool")
                           collect (format "%s" (plist-get message :content)))))

(defconst parley-it--python-title "\\(?:python_eval\\|Run Python\\)"
  "The title of a python_eval call: its name, or the title a person reads.")

(defun parley-it--python (code)
  "Return a scripted model reply that calls python_eval with CODE."
  (list :tool_calls (vector (list :name "python_eval" :arguments (list :code code)))))

(defun parley-it--marker-code (name)
  "Return Python code that writes the marker file NAME in the workspace."
  (format "open(%S, 'w').write('ran')" (expand-file-name name parley-it--workspace)))

(parley-it--deftest parley-it-permission-and-elisp-eval
  "`elisp_eval' asks inline; `y' runs it once and its value reaches the model."
  (defvar parley-it--evaluated nil)
  (setq parley-it--evaluated nil)
  (parley-it--script
   (list :tool_calls (vector (list :name "elisp_eval"
                                   :arguments (list :code "(progn (setq parley-it--evaluated t) (* 6 7 1000))"))))
   (list :text "Emacs says 42000."))
  (let ((parley-allow-elisp-eval nil))
    (parley-test--no-minibuffer
      (with-current-buffer (parley t)
        (parley-it--send "Compute in Emacs")
        (parley-it--question)
        (should (string-match-p "Parley asks permission: elisp_eval (execute)\n    (progn (setq parley-it--evaluated t) (\\* 6 7 1000))\n"
                                (parley-it--transcript)))
        (should-not parley-it--evaluated)
        (parley-it--answer "y")
        (parley-it--wait-idle)
        (should parley-it--evaluated)
        (should (string-match-p "elisp_eval.*\\[done\\]" (parley-it--transcript)))
        (should (string-match-p "Allowed once: elisp_eval\nEmacs says 42000\\.\n\\'"
                                (parley-it--transcript))))))
  ;; The value went back to the model.
  (should (string-match-p "42000" (car (last (parley-it--tool-messages))))))

(parley-it--deftest parley-it-permission-rejected
  "`n' rejects: the tool does not run and the model is told."
  (parley-it--script (parley-it--python (parley-it--marker-code "rejected.txt"))
                     (list :text "Understood, I will not."))
  (with-current-buffer (parley t)
    (parley-it--send "Try it")
    (parley-it--answer "n")
    (parley-it--wait-idle 90)
    (should (string-match-p (concat "Rejected: " parley-it--python-title
                                    "\nUnderstood, I will not\\.\n\\'")
                            (parley-it--transcript)))
    (should (string-match-p (concat parley-it--python-title ".*\\[failed\\]")
                            (parley-it--transcript))))
  (should-not (file-exists-p (expand-file-name "rejected.txt" parley-it--workspace)))
  (should (string-match-p "rejected" (car (last (parley-it--tool-messages))))))

(parley-it--deftest parley-it-permission-keys-elsewhere-never-approve
  "RET and `y' typed in another buffer, or in the prompt, leave the question pending."
  (let ((elsewhere (generate-new-buffer "parley-elsewhere")))
    (unwind-protect
        (progn
          (parley-it--script (parley-it--python (parley-it--marker-code "elsewhere.txt"))
                             (list :text "Done."))
          (with-current-buffer (parley t)
            (let ((chat (current-buffer)))
              ;; RET typed while Parley asks.  A question read in the
              ;; minibuffer would take it as its default answer (the
              ;; minibuffer of a batch Emacs reads stdin, so it is mimicked).
              (setq unread-command-events (listify-key-sequence (kbd "RET")))
              (cl-letf (((symbol-function 'completing-read)
                         (lambda (_prompt _table &optional _pred _match _init _hist default
                                          &rest _)
                           (if (equal unread-command-events '(13))
                               (progn (setq unread-command-events nil) default)
                             (signal 'quit nil)))))
                (parley-it--send "Run it")
                (let ((until (+ (float-time) 3)))
                  (while (< (float-time) until) (accept-process-output nil 0.05))))
              (should-not (file-exists-p (expand-file-name "elsewhere.txt" parley-it--workspace)))
              (should (equal unread-command-events '(13)))
              (setq unread-command-events nil)
              (parley-it--question)
              (parley-test--type elsewhere "RET y RET a RET")
              (parley-test--type chat "y RET" (with-current-buffer chat (point-max)))
              (parley-test--type chat "RET" (parley-test--question-pos))
              ;; Time for a wrongly approved call to run and reach the model.
              (let ((until (+ (float-time) 2)))
                (while (< (float-time) until) (accept-process-output nil 0.05)))
              (should (buffer-local-value 'parley--questions chat))
              (should (buffer-local-value 'parley--busy chat))
              (should-not (file-exists-p (expand-file-name "elsewhere.txt" parley-it--workspace)))
              (should-not (parley-it--tool-messages))
              ;; Its own key, in it, runs it.
              (parley-it--answer "y")
              (parley-it--wait-idle 90)
              (should (file-exists-p (expand-file-name "elsewhere.txt" parley-it--workspace))))))
      (kill-buffer elsewhere))))

(parley-it--deftest parley-it-permission-allow-always
  "`a' allows the tool for the session: its next call does not ask."
  (parley-it--script (parley-it--python (parley-it--marker-code "always-1.txt"))
                     (parley-it--python (parley-it--marker-code "always-2.txt"))
                     (list :text "Both ran."))
  (let ((asked 0))
    (cl-letf* ((ask (symbol-function 'parley--ask))
               ((symbol-function 'parley--ask)
                (lambda (&rest args) (cl-incf asked) (apply ask args))))
      (with-current-buffer (parley t)
        (parley-it--send "Run twice")
        (parley-it--answer "a")
        (parley-it--wait-idle 90)
        (should (string-match-p (concat "Allowed always: " parley-it--python-title
                                        "\n\\(.\\|\n\\)*Both ran\\.\n\\'")
                                (parley-it--transcript)))))
    (should (= asked 1)))
  (dolist (name '("always-1.txt" "always-2.txt"))
    (should (file-exists-p (expand-file-name name parley-it--workspace)))))

(parley-it--deftest parley-it-kill-buffer-cancels-turn
  "Killing the chat buffer during a question cancels the turn; nothing runs."
  (parley-it--script (parley-it--python (parley-it--marker-code "killed.txt"))
                     (list :text "Should not be asked for."))
  (let (session-id)
    (with-current-buffer (parley t)
      (setq session-id parley--session-id)
      (parley-it--send "Run it")
      (parley-it--question)
      (kill-buffer))
    (let ((until (+ (float-time) 2)))
      (while (< (float-time) until) (accept-process-output nil 0.05)))
    (should-not (file-exists-p (expand-file-name "killed.txt" parley-it--workspace)))
    ;; The turn was cancelled, not continued with a rejection: the model
    ;; was not called again, and the stored call says it was cancelled.
    (should-not (parley-it--tool-messages))
    (should-not (memq 'parley--waiting-text global-mode-string))
    (with-current-buffer (parley-open-session session-id
                                              (directory-file-name parley-it--workspace))
      (parley-it--wait-idle 90)
      (should (string-match-p (concat parley-it--python-title ".*\\[failed\\]")
                              (parley-it--transcript)))
      (should (string-match-p "cancelled this call" (parley-it--transcript))))))

(parley-it--deftest parley-it-cancel-then-next-prompt
  "Cancel ends the turn promptly; the next prompt works."
  (parley-it--script
   (list :text (make-string 2000 ?a) :chunk_size 2
         :pacing (list :chunks_per_second 40)))
  (with-current-buffer (parley t)
    (parley-it--send "Write a lot")
    (parley-it--wait (lambda () (string-match-p "aaaa" (parley-it--transcript)))
                     "the first chunks")
    (let ((start (float-time)))
      (parley-cancel)
      (parley-it--wait-idle 5)
      (should (< (- (float-time) start) 3)))
    (should (string-match-p "a\nStopped\\.\n\\'" (parley-it--transcript)))
    (parley-it--script (list :text "Fresh answer."))
    (parley-it--send "Again")
    (parley-it--wait-idle)
    (should (string-match-p "You\nAgain\n\nParley\nFresh answer\\.\n\\'" (parley-it--transcript)))))

(defun parley-it--server-tool-p (name)
  "Return non-nil when the running server offers the tool NAME."
  (parley--live-connection)
  (cl-find name (append (parley-wire-meta parley--server-info :tools) nil)
           :key (lambda (tool) (plist-get tool :name)) :test #'equal))

(defun parley-it--edit-turn (file)
  "Run a turn whose approved edit changes FILE from \"value = 1\" to \"value = 2\".
FILE is visited by a buffer, which is returned; the model reads it
first, as the edit tools require."
  (unless (parley-it--server-tool-p "edit_file")
    (ert-skip "integration test skipped: the server has no edit_file tool yet"))
  (with-temp-file file (insert "value = 1\n"))
  (let ((visiting (find-file-noselect file))
        (name (file-relative-name file parley-it--workspace)))
    (parley-it--script
     (list :tool_calls (vector (list :name "read_file" :arguments (list :path name))))
     (list :tool_calls (vector (list :name "edit_file"
                                     :arguments (list :path name :old_text "value = 1"
                                                      :new_text "value = 2"))))
     (list :text "Edited."))
    (parley-it--send "Change the value")
    (parley-it--question)
    (should (string-match-p "-value = 1\n    \\+value = 2" (parley-it--transcript)))
    (parley-it--answer "y")
    (parley-it--wait-idle 60)
    (should (string-match-p (concat "▸ Edited " (regexp-quote name) " \\+1 −1\n")
                            (parley-test--visible-transcript)))
    visiting))

(defun parley-it--file-text (file)
  "Return the text of FILE on disk."
  (with-temp-buffer (insert-file-contents file) (buffer-string)))

(parley-it--deftest parley-it-edit-lands-in-visiting-buffer
  "An approved edit comes as fs/write_text_file: the visiting buffer has it, saved."
  (let ((file (expand-file-name "edited.py" parley-it--workspace))
        (visiting nil))
    (unwind-protect
        (with-current-buffer (parley t)
          (setq visiting (parley-it--edit-turn file))
          (should (equal (with-current-buffer visiting (buffer-string)) "value = 2\n"))
          (should-not (buffer-modified-p visiting))
          (should (equal (parley-it--file-text file) "value = 2\n"))
          ;; One undo in the buffer takes the edit back.
          (with-current-buffer visiting
            (undo-boundary)
            (let ((last-command nil)) (undo))
            (should (equal (buffer-string) "value = 1\n"))))
      (when (buffer-live-p visiting)
        (with-current-buffer visiting (set-buffer-modified-p nil))
        (kill-buffer visiting)))))

(parley-it--deftest parley-it-undo-turn-restores-buffer
  "`parley-undo-turn' after an edit brings the file and its buffer back."
  (let ((file (expand-file-name "undone.py" parley-it--workspace))
        (visiting nil))
    (unwind-protect
        (with-current-buffer (parley t)
          (setq visiting (parley-it--edit-turn file))
          (should (equal (with-current-buffer visiting (buffer-string)) "value = 2\n"))
          (parley-undo-turn)
          ;; Shown as `/undo' is, live and replayed (the server keeps it).
          (parley-it--wait (lambda () (string-match-p "\n\nYou\n/undo\n\nParley\nRestored \
the files of turn [0-9]+ as they were before it:\n- `undone\\.py` restored\n\\'"
                                                      (parley-it--transcript)))
                           "the turn undone")
          (parley-it--wait (lambda () (equal (with-current-buffer visiting (buffer-string))
                                             "value = 1\n"))
                           "the buffer reverted")
          (should (equal (parley-it--file-text file) "value = 1\n")))
      (when (buffer-live-p visiting)
        (with-current-buffer visiting (set-buffer-modified-p nil))
        (kill-buffer visiting)))))

(parley-it--deftest parley-it-session-reopened
  "A stored session is listed, reopened, and its history shown again."
  (parley-it--script (list :thinking "Hmm." :text "Paris is the capital."))
  (let (session-id)
    (with-current-buffer (parley t)
      (setq session-id parley--session-id)
      (parley-it--send "Capital of France?")
      (parley-it--wait-idle)
      (kill-buffer))
    (parley-restart)
    (cl-letf (((symbol-function 'completing-read)
               (lambda (_prompt collection &rest _)
                 (let ((choices (all-completions "" collection)))
                   (should choices)
                   (or (cl-find-if (lambda (c) (string-match-p (regexp-quote session-id) c))
                                   choices)
                       (car choices))))))
      (parley-sessions))
    (with-current-buffer (gethash session-id parley--sessions)
      (parley-it--wait-idle)
      (should (string-match-p "You\nCapital of France\\?\n\\(.\\|\n\\)*Paris is the capital\\."
                              (parley-it--transcript)))
      (should (string-match-p "▸ Thinking" (parley-test--visible-transcript)))
      ;; The reopened session takes prompts.
      (parley-it--script (list :text "Berlin."))
      (parley-it--send "And Germany?")
      (parley-it--wait-idle)
      (should (string-match-p "And Germany\\?\n\nParley\nBerlin\\.\n\\'" (parley-it--transcript))))))

(parley-it--deftest parley-it-server-death-and-restart
  "The server dying is reported in the buffer, and a restart works."
  (parley-it--script (list :text "Before."))
  (with-current-buffer (parley t)
    (parley-it--send "One")
    (parley-it--wait-idle)
    (signal-process (jsonrpc--process parley--connection) 'kill)
    (parley-it--wait (lambda () (string-match-p "The Parley server exited" (parley-it--transcript)))
                     "the report of the server's death")
    (should (eq (get-text-property (- parley--output 3) 'face) 'parley-error))
    (should-not (string-match-p "Error: Server died" (parley-it--transcript)))
    (parley-restart)
    (parley-it--script (list :text "After the restart."))
    (parley-it--recording-methods
      (parley-it--send "Two")
      (parley-it--wait-idle)
      ;; The session itself resumes, without a replay: the server can.
      (should (parley--server-supports :resume))
      (should (equal (reverse sent)
                     '(session/resume session/prompt))))
    (should (string-match-p "\\`You\nOne\n\nParley\nBefore\\.\nError: The Parley server exited[^\0]*\
The Parley server was restarted\\.\n\nYou\nTwo\n\nParley\nAfter the restart\\.\n\\'"
                            (parley-it--transcript)))))

(parley-it--deftest parley-it-provider-error-shown
  "A provider failure ends the turn with an error in the buffer, in the error face."
  (with-current-buffer (parley t)
    (parley-it--send-failing "Fail please" 10)
    (let ((pos (save-excursion (goto-char parley--start)
                               (search-forward "Error: " parley--output t))))
      (should pos)
      (should (eq (get-text-property (1- pos) 'face) 'parley-error)))
    (should-not parley--busy)
    ;; The next prompt works.
    (parley-it--script (list :text "Recovered."))
    (parley-it--send "Again")
    (parley-it--wait-idle)
    (should (string-match-p "Recovered\\.\n\\'" (parley-it--transcript)))))

(parley-it--deftest parley-it-one-server-for-all-buffers
  "Chat buffers of two projects share one server process, and each gets its answer."
  (let* ((other (file-name-as-directory (make-temp-file "parley-other-" t)))
         (first (parley t))
         (second (let ((default-directory other)) (parley t))))
    (unwind-protect
        (progn
          (should-not (eq first second))
          (should (eq (buffer-local-value 'parley--conn first)
                      (buffer-local-value 'parley--conn second)))
          (should (equal (buffer-local-value 'parley--cwd second)
                         (directory-file-name other)))
          ;; The same project gives the same buffer.
          (with-temp-buffer
            (setq default-directory parley-it--workspace)
            (should (eq (parley) first)))
          (parley-it--script (list :text "Same answer for both."))
          (with-current-buffer first (parley-it--send "Hello from one"))
          (with-current-buffer second (parley-it--send "Hello from two"))
          (with-current-buffer first (parley-it--wait-idle))
          (with-current-buffer second (parley-it--wait-idle))
          (should (string-match-p "Hello from one\n\nParley\nSame answer for both\\.\n\\'"
                                  (parley-it--transcript first)))
          (should (string-match-p "Hello from two\n\nParley\nSame answer for both\\.\n\\'"
                                  (parley-it--transcript second))))
      (delete-directory other t))))

(parley-it--deftest parley-it-set-model
  "`parley-set-model' lists the server's models and switches the session."
  (with-current-buffer (parley t)
    (let (offered)
      (cl-letf (((symbol-function 'completing-read)
                 (lambda (_prompt collection &rest _)
                   (setq offered (all-completions "" collection))
                   "openai:gpt-4.1")))
        (call-interactively #'parley-set-model))
      (should (member "openai:gpt-4.1-mini" offered))
      (parley-it--wait (lambda () (equal parley--model "openai:gpt-4.1")) "the model switch")
      ;; Through the session's config option, which the answer updated.
      (should (equal (plist-get (parley--config-option :category "model") :currentValue)
                     "openai:gpt-4.1"))
      (parley-it--script (list :text "ok"))
      (parley-it--send "hi")
      (parley-it--wait-idle)
      (should (equal (plist-get (plist-get (car (last (parley-it--requests))) :body) :model)
                     "gpt-4.1")))))

(parley-it--deftest parley-it-set-tool-policy
  "`parley-set-tool-policy' switches the session to synchronous calls."
  (with-current-buffer (parley t)
    (cl-letf (((symbol-function 'completing-read)
               (lambda (_prompt collection &rest _)
                 (should (member "sync" (all-completions "" collection)))
                 "sync")))
      (call-interactively #'parley-set-tool-policy))
    (parley-it--wait (lambda () (equal (plist-get (parley--config-option :id "tool_policy")
                                                  :currentValue)
                                       "sync"))
                     "the tool policy's config option")
    (parley-it--script (list :text "synchronous answer"))
    (parley-it--send "hi")
    (parley-it--wait-idle)
    (should (string-match-p "synchronous answer\n\\'" (parley-it--transcript)))
    ;; No round was streamed.
    (should-not (plist-get (plist-get (car (last (parley-it--requests))) :body) :stream))))

(parley-it--deftest parley-it-slash-command-runs
  "A prompt that is a slash command runs it: /model switches without a model call."
  (with-current-buffer (parley t)
    (let ((calls (length (parley-it--requests))))
      (parley-it--send "/model openai:gpt-4.1")
      (parley-it--wait-idle)
      (should (string-match-p "You\n/model openai:gpt-4.1\n\nParley\nSwitched to `openai:gpt-4.1` from the next prompt on\\.\n\\'"
                              (parley-it--transcript)))
      ;; The server announced the change (config_option_update): the
      ;; header line shows it.
      (parley-it--wait (lambda () (equal parley--model "openai:gpt-4.1"))
                       "the config_option_update")
      (should (equal (plist-get (parley--config-option :category "model") :currentValue)
                     "openai:gpt-4.1"))
      (should (= calls (length (parley-it--requests)))))))

(parley-it--deftest parley-it-slash-commands-complete
  "The slash commands the server announces complete at the prompt."
  (with-current-buffer (parley t)
    ;; Announced right after the answer to session/new (not held
    ;; back until the server writes again: see `parley--request').
    (parley-it--wait (lambda () parley--commands) "the available commands" 5)
    (should (member "cost" (mapcar #'parley--command-name parley--commands)))
    (goto-char (point-max))
    (insert "/un")
    (parley-tab)
    (should (equal (parley--current-input) "/undo"))))

(parley-it--deftest parley-it-kill-buffer-closes-session
  "Killing an idle chat buffer closes its session on the server; it stays stored."
  (parley-it--script (list :text "Stored answer."))
  (let (session-id)
    (parley-it--recording-methods
      (with-current-buffer (parley t)
        (setq session-id parley--session-id)
        (parley-it--send "Keep this")
        (parley-it--wait-idle)
        (kill-buffer))
      (should (eq (car sent) 'session/close)))
    (with-current-buffer (parley-open-session session-id
                                              (directory-file-name parley-it--workspace))
      (parley-it--wait-idle)
      (should (string-match-p "You\nKeep this\n\nParley\nStored answer\\.\n\\'"
                              (parley-it--transcript))))))

(parley-it--deftest parley-it-turn-outlives-default-timeout
  "A turn longer than jsonrpc's 10 s default does not time out."
  (parley-it--script (list :text "slow answer" :pacing (list :first_token_delay 11.0)))
  (with-current-buffer (parley t)
    (parley-it--send "Take your time")
    (parley-it--wait-idle 30)
    (should (string-match-p "slow answer\n\\'" (parley-it--transcript)))
    (should-not (string-match-p "Error" (parley-it--transcript)))))

(provide 'parley-integration-test)
;;; parley-integration-test.el ends here
