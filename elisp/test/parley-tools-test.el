;;; parley-tools-test.el --- Unit tests of the Emacs tools (parley-tools.el)  -*- lexical-binding: t; -*-

;;; Commentary:

;; The tools Emacs offers the agent: their specs, their calls, the
;; approval `elisp_eval' needs, and their replies sent later over a
;; loopback connection.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)
(require 'parley-test)

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
                                      (parley--header-text)))
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
(ert-deftest parley-deferred-reply-to-call-tool ()
  (parley-test--with-loopback
    (let ((result (jsonrpc-request conn '_parley/editor/callTool
                                   '(:sessionId "x" :toolCallId "c1" :name "elisp_describe"
                                                :arguments (:symbol "car"))
                                   :timeout 10)))
      (should (string-match-p "built-in function" (plist-get result :content)))
      (should (eq (plist-get result :isError) :json-false)))))

(provide 'parley-tools-test)
;;; parley-tools-test.el ends here
