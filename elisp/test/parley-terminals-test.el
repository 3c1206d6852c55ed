;;; parley-terminals-test.el --- ACP terminals in Emacs (parley-terminals.el)  -*- lexical-binding: t; -*-

;;; Commentary:

;; The `terminal/*' requests as the server sends them, through a
;; loopback connection (each request Emacs sends comes back to it as the
;; server's, and its answer as the response): real processes in real
;; terminal buffers, the output kept within its byte limit, the exit
;; answered from the process's sentinel, kill and release; the tool
;; card's link to the buffer.  And the same end to end, the real server
;; running `run_command' in an Emacs terminal.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley-integration-test)   ; parley, parley-test and the real server's helpers

(defun parley-terminals-test--call (conn method params)
  "Send the request METHOD with PARAMS on CONN; return its answer once it came.
An error answer is (error ERR)."
  (let ((answer (parley-test--request conn method params)))
    (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
    (car answer)))

(defun parley-terminals-test--create (conn dir script &rest more)
  "Create a terminal on CONN running the shell SCRIPT in DIR; return its id.
MORE are more params of `terminal/create'."
  (let ((answer (parley-terminals-test--call
                 conn 'terminal/create
                 (append (list :sessionId parley-test--session :command "/bin/sh"
                               :args (vector "-c" script) :cwd dir)
                         more))))
    (should (stringp (plist-get answer :terminalId)))
    (plist-get answer :terminalId)))

(defun parley-terminals-test--params (id)
  "Return the params naming the terminal ID of the test session."
  (list :sessionId parley-test--session :terminalId id))

(defmacro parley-terminals-test--with (&rest body)
  "Run BODY in a chat buffer of the test session, `conn' a loopback, `dir' a directory."
  (declare (indent 0) (debug t))
  `(let ((dir (file-name-as-directory (make-temp-file "parley-terminal-" t)))
         (parley-display-terminals nil))
     (unwind-protect
         (parley-test--with-chat
           (parley-test--with-loopback ,@body))
       (delete-directory dir t))))

(ert-deftest parley-terminal-capability-advertised ()
  (should (eq (plist-get (plist-get (parley--initialize-params) :clientCapabilities) :terminal)
              t)))

(ert-deftest parley-terminal-fills-and-exits ()
  ;; The buffer fills while the command runs; the server's copy of the
  ;; output has no exit status until it ended; wait_for_exit is answered
  ;; later, by the sentinel, while other requests are answered at once.
  (parley-terminals-test--with
    (let* ((id (parley-terminals-test--create
                conn dir "printf 'first\\n'; while [ ! -e go ]; do sleep 0.02; done
printf 'src/app.py:3: error: \\033[31mboom\\033[0m\\n'; exit 3"
                :env (vector (list :name "PARLEY_TERMINAL_TEST" :value "1"))
                :outputByteLimit 1000000))
           (buffer (parley-terminals-buffer id))
           (params (parley-terminals-test--params id)))
      (should (string-prefix-p "*parley-terminal: printf 'first" (buffer-name buffer)))
      (should (eq (buffer-local-value 'major-mode buffer) 'parley-terminal-mode))
      (with-current-buffer buffer (should (derived-mode-p 'compilation-mode)))
      (parley-test--wait (lambda () (with-current-buffer buffer
                                      (string-search "first\n" (buffer-string)))))
      (let ((waited (parley-test--request conn 'terminal/wait_for_exit params))
            (output (parley-terminals-test--call conn 'terminal/output params)))
        (should (equal output '(:output "first\n" :truncated :json-false)))
        (parley-test--settle)
        (should (eq (car waited) 'pending))
        (with-temp-file (expand-file-name "go" dir))
        (parley-test--wait (lambda () (not (eq (car waited) 'pending))))
        (should (equal (car waited) '(:exitCode 3 :signal nil))))
      (let ((output (parley-terminals-test--call conn 'terminal/output params)))
        ;; The server's copy is the output as written, colours included.
        (should (equal (plist-get output :output)
                       "first\nsrc/app.py:3: error: \e[31mboom\e[0m\n"))
        (should (equal (plist-get output :exitStatus) '(:exitCode 3 :signal nil))))
      (with-current-buffer buffer
        (should (string-match-p "^src/app.py:3: error: boom\n\n\\[exited with code 3\\]"
                                (buffer-string)))
        ;; In colour, without the escape sequences.
        (should (get-text-property (parley-test--pos "boom") 'font-lock-face))
        (should-not (get-text-property (1+ (parley-test--pos "\nsrc/app.py")) 'font-lock-face))
        ;; The error line is a link to the file, as in a compilation.
        (make-directory (expand-file-name "src" dir))
        (with-temp-file (expand-file-name "src/app.py" dir) (insert "one\ntwo\nthree\n"))
        ;; Not run again from here (`recompile' would run `compile-command').
        (cl-letf (((symbol-function 'compile) (lambda (&rest _) (error "Compiled"))))
          (should (eq (car (parley-test--type buffer "g")) 'user-error))
          (should-error (revert-buffer) :type 'user-error))
        (goto-char (point-min))
        (compilation-next-error 1)
        (should (looking-at "src/app.py:3"))
        (let ((compilation-context-lines nil)) (compile-goto-error))
        (should (equal (buffer-file-name) (expand-file-name "src/app.py" dir)))
        (should (= (line-number-at-pos) 3))
        (kill-buffer))
      (parley-terminals-test--call conn 'terminal/release params)
      (kill-buffer buffer))))

(ert-deftest parley-terminal-card-links-to-buffer ()
  (parley-terminals-test--with
    (save-window-excursion
      (let* ((id (parley-terminals-test--create conn dir "echo linked"))
             (buffer (parley-terminals-buffer id)))
        (parley-test--update
         (format "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c1\",\"title\":\"Run `echo linked`\",\"kind\":\"execute\",\"status\":\"in_progress\",\"content\":[{\"type\":\"terminal\",\"terminalId\":\"%s\"}]}" id))
        (should (string-match-p (concat "▸ Run `echo linked` \\[running\\]\n    \\[terminal: "
                                        (regexp-quote (buffer-name buffer)) "\\]\n")
                                (parley-test--visible-transcript)))
        ;; RET on the link shows the terminal.
        (should-not (parley-test--type (current-buffer) "RET" (parley-test--pos "[terminal: ")))
        (should (eq (window-buffer (selected-window)) buffer))
        (parley-terminals-test--call conn 'terminal/release (parley-terminals-test--params id))
        ;; The final update keeps the link: the buffer outlives the release.
        (parley-test--update
         (format "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"c1\",\"status\":\"completed\",\"content\":[{\"type\":\"terminal\",\"terminalId\":\"%s\"},{\"type\":\"content\",\"content\":{\"type\":\"text\",\"text\":\"linked\\nExit code: 0\"}}]}" id))
        (should (string-match-p "\\[done\\]\n    \\[terminal: " (parley-test--visible-transcript)))
        (kill-buffer buffer)
        ;; A terminal gone (or of an earlier Emacs, on replay) says so.
        (parley-test--update
         "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"c1\",\"status\":\"completed\"}")
        (should (string-match-p "\\[done\\]\n    \\[terminal output not kept\\]\n"
                                (parley-test--visible-transcript)))
        ;; Nor is the terminal of another Emacs, whose ids were its own,
        ;; though this one made terminals since.
        (parley-terminals-test--create conn dir "true")
        (parley-test--update
         (format "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c2\",\"title\":\"Run `make`\",\"status\":\"completed\",\"content\":[{\"type\":\"terminal\",\"terminalId\":\"term-%d\"}]}"
                 parley-terminals--count))
        (should (string-match-p "Run `make` \\[done\\]\n    \\[terminal output not kept\\]\n"
                                (parley-test--visible-transcript)))))))

(ert-deftest parley-terminal-kill-and-release ()
  (parley-terminals-test--with
    (let* ((id (parley-terminals-test--create
                conn dir "(trap '' HUP; exec sleep 30) & echo $! > grandchild; echo started; wait"))
           (params (parley-terminals-test--params id))
           (buffer (parley-terminals-buffer id))
           (waited (parley-test--request conn 'terminal/wait_for_exit params)))
      (parley-test--wait (lambda () (with-current-buffer buffer
                                      (string-search "started" (buffer-string)))))
      (should (equal (parley-terminals-test--call conn 'terminal/kill params) nil))
      (parley-test--wait (lambda () (not (eq (car waited) 'pending))))
      (should (equal (car waited) '(:exitCode nil :signal "SIGKILL")))
      ;; The whole process group: the command's own child too (which
      ;; ignores the hangup that ends the terminal's session).
      (let ((grandchild (with-temp-buffer
                          (insert-file-contents (expand-file-name "grandchild" dir))
                          (string-to-number (buffer-string)))))
        (should (> grandchild 0))
        (parley-test--wait (lambda ()
                             (let ((state (alist-get 'state (process-attributes grandchild))))
                               (or (null state) (equal state "Z"))))))
      ;; Killed, the terminal is still there: its output, its status.
      (should (equal (parley-terminals-test--call conn 'terminal/output params)
                     '(:output "started\n" :truncated :json-false
                               :exitStatus (:exitCode nil :signal "SIGKILL"))))
      (should (equal (parley-terminals-test--call conn 'terminal/wait_for_exit params)
                     '(:exitCode nil :signal "SIGKILL")))
      (parley-terminals-test--call conn 'terminal/release params)
      (should (eq (car (parley-terminals-test--call conn 'terminal/output params)) 'error))
      (should (buffer-live-p buffer))
      (kill-buffer buffer))
    ;; Released while it runs: the process is killed, the buffer kept.
    (let* ((id (parley-terminals-test--create conn dir "exec sleep 30"))
           (process (get-buffer-process (parley-terminals-buffer id))))
      (should (process-live-p process))
      (parley-terminals-test--call conn 'terminal/release (parley-terminals-test--params id))
      (parley-test--wait (lambda () (not (process-live-p process))))
      (should (buffer-live-p (process-buffer process)))
      (kill-buffer (process-buffer process)))))

(ert-deftest parley-terminal-refuses-bad-requests ()
  (parley-terminals-test--with
    (pcase-dolist (`(,params ,code ,words)
                   (list
                    `((:sessionId "no-such-session" :command "true" :cwd ,dir)
                      -32002 "Unknown session")
                    `((:sessionId ,parley-test--session :command "true" :cwd "relative/dir")
                      -32602 "not an absolute existing directory")
                    `((:sessionId ,parley-test--session :command "" :cwd ,dir)
                      -32602 "non-empty string")
                    `((:sessionId ,parley-test--session :command "true" :cwd ,dir
                                  :env [(:name "A=B" :value "c")])
                      -32602 "without =")
                    `((:sessionId ,parley-test--session :command "/no/such/program" :cwd ,dir)
                      -32602 "no program /no/such/program")
                    `((:sessionId ,parley-test--session :command ,dir :cwd ,dir)
                      -32602 ,(concat "no program " dir))
                    `((:sessionId ,parley-test--session :command "no-such-program-anywhere"
                                  :cwd ,dir)
                      -32602 "no program no-such-program-anywhere")))
      (let* ((terminals (lambda ()
                          (cl-remove-if-not (lambda (b) (string-prefix-p "*parley-terminal: "
                                                                         (buffer-name b)))
                                            (buffer-list))))
             (before (funcall terminals))
             (answer (parley-terminals-test--call conn 'terminal/create params)))
        ;; Refused, it leaves no buffer behind.
        (should (equal (funcall terminals) before))
        (should (eq (car answer) 'error))
        (should (eql (plist-get (cadr answer) :code) code))
        (should (string-search words (plist-get (cadr answer) :message)))))
    ;; Another session's terminal, or an unknown one, is not there.
    (let ((id (parley-terminals-test--create conn dir "true")))
      (dolist (params (list (list :sessionId "other" :terminalId id)
                            (list :sessionId parley-test--session :terminalId "term-none")))
        (let ((answer (parley-terminals-test--call conn 'terminal/kill params)))
          (should (eq (car answer) 'error))
          (should (string-search "Unknown terminal" (plist-get (cadr answer) :message)))))
      (parley-terminals-test--call conn 'terminal/release (parley-terminals-test--params id))
      (kill-buffer (parley-terminals-buffer id)))))

;;;; The output kept within its byte limit: a property

(defun parley-terminals-test--random-text (state)
  "Return a random text of ASCII, accented, wide and emoji characters, and raw bytes.
STATE is the `cl-random' state."
  (let ((alphabet (vector ?a ?z ?\n ?\e ?é ?ü ?€ ?中 ?😀 (unibyte-char-to-multibyte #xff))))
    (apply #'string (cl-loop repeat (cl-random 40 state)
                             collect (aref alphabet (cl-random (length alphabet) state))))))

(defun parley-terminals-test--expected (text limit)
  "Return the longest end of TEXT of at most LIMIT bytes in UTF-8 (nil: any)."
  (if (null limit)
      text
    (cl-loop for start from 0 to (length text)
             for tail = (substring text start)
             when (<= (parley-terminals--utf-8-bytes tail) limit) return tail)))

(ert-deftest parley-terminal-output-limit-property ()
  ;; Whatever the chunks and the limit, terminal/output is the longest
  ;; end of the output within the limit, whole characters only, valid
  ;; for JSON; truncated exactly when the output was over the limit.
  (let ((state (cl-make-random-state 25)))
    (dotimes (_ 400)
      (let* ((limit (nth (cl-random 4 state) (list nil 0 (cl-random 12 state)
                                                   (cl-random 80 state))))
             (terminal (parley-terminal--create :id "t" :limit limit))
             (chunks (cl-loop repeat (cl-random 6 state)
                              collect (parley-terminals-test--random-text state)))
             (text (parley-terminals--valid-text (apply #'concat chunks))))
        (dolist (chunk chunks)
          (parley-terminals--keep terminal (parley-terminals--valid-text chunk)))
        (pcase-let ((`(,output . ,truncated) (parley-terminals--output terminal)))
          (ert-info ((format "chunks %S, limit %S: %S" chunks limit output))
            (should (equal output (parley-terminals-test--expected text limit)))
            (should (eq (and truncated t)
                        (and limit (> (parley-terminals--utf-8-bytes text) limit) t)))
            (should (json-serialize (list :output output)))
            (should-not (string-search (string (unibyte-char-to-multibyte #xff)) output))))))))

;;;; End to end: the server runs a command in an Emacs terminal

(defun parley-terminals-test--server-runs-commands ()
  "Return non-nil when the installed server has the `run_command' tool."
  (zerop (call-process parley-test-env-python nil nil nil
                       "-c" "import parley.tools.run_command")))

(defun parley-terminals-test--buffer-named (prefix)
  "Wait for the terminal buffer whose name starts with PREFIX; return it."
  (parley-it--wait (lambda () (cl-find-if (lambda (b) (string-prefix-p prefix (buffer-name b)))
                                          (buffer-list)))
                   (concat "the buffer " prefix)))

(parley-it--deftest parley-it-command-in-emacs-terminal
  "The real server runs `run_command' in an Emacs terminal; the card links to it.
Stop kills the command in its terminal.
SKIPPED ONLY while the server has no `run_command' tool yet (issue 25)."
  (unless (parley-terminals-test--server-runs-commands)
    (ert-skip "the server has no run_command tool yet (parley.tools.run_command)"))
  (save-window-excursion
    (let ((go (expand-file-name "go-terminal" parley-it--workspace))
          (parley-display-terminals t))
      (parley-it--script
       (list :tool_calls
             (vector (list :name "run_command"
                           :arguments
                           (list :command "echo first; i=0; while [ ! -e go-terminal ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done; echo 'src/app.py:3: error: boom'"))))
       (list :text "The command failed at src/app.py:3."))
      (with-current-buffer (parley t)
        (parley-it--send "Run it")
        (parley-it--answer "y")
        (let* ((buffer (parley-terminals-test--buffer-named "*parley-terminal: echo first"))
               (process (get-buffer-process buffer)))
          ;; It fills while the command runs, and the card links to it.
          (parley-it--wait (lambda () (with-current-buffer buffer
                                        (string-search "first\n" (buffer-string))))
                           "the first line in the terminal")
          (should (process-live-p process))
          (parley-it--wait (lambda () (string-search (format "[terminal: %s]" (buffer-name buffer))
                                                     (parley-test--visible-transcript)))
                           "the link in the tool card")
          (with-temp-file go)
          (parley-it--wait-idle)
          (with-current-buffer buffer
            (should (string-match-p "first\nsrc/app.py:3: error: boom\n\n\\[exited with code 0\\]"
                                    (buffer-string))))
          (should (string-match-p "\\[terminal: .*\\]\n\\(.\\|\n\\)*The command failed"
                                  (parley-test--visible-transcript)))
          (kill-buffer buffer))
        ;; The model got the output, from the terminal.
        (should (string-search "boom" (car (last (parley-it--tool-messages)))))
        ;; Stop (C-c C-k) while a command runs: its terminal's process ends.
        (parley-it--script
         (list :tool_calls (vector (list :name "run_command"
                                         :arguments (list :command "echo waiting; sleep 120")))))
        (parley-it--send "Wait")
        (parley-it--answer "y")
        (let* ((buffer (parley-terminals-test--buffer-named "*parley-terminal: echo waiting"))
               (process (get-buffer-process buffer)))
          (parley-it--wait (lambda () (with-current-buffer buffer
                                        (string-search "waiting\n" (buffer-string))))
                           "the command's first line")
          (should (process-live-p process))
          (should-not (parley-test--type (current-buffer) "C-c C-k"))
          (parley-it--wait-idle)
          (parley-it--wait (lambda () (not (process-live-p process))) "the command's end")
          (with-current-buffer buffer
            (parley-it--wait (lambda () (string-search "\n[killed by SIG" (buffer-string)))
                             "the kill in the terminal"))
          (kill-buffer buffer))))))

(provide 'parley-terminals-test)
;;; parley-terminals-test.el ends here
