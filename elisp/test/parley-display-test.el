;;; parley-display-test.el --- Tests of the display rules (parley-display.el)  -*- lexical-binding: t; -*-

;;; Commentary:

;; The rules of docs/display.md, as parley-display.el implements them:
;; every case of tests/display-cases.json (the file pytest and the VS
;; Code tests check too), and each example of the document.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'iso8601)
(require 'parley-display)

(defconst parley-display-test--cases-file
  (expand-file-name "../../tests/display-cases.json"
                    (file-name-directory (or load-file-name buffer-file-name)))
  "The display cases every client checks, at the repository's root.")

(defun parley-display-test--cases (kind)
  "Return the cases of KIND (a key of tests/display-cases.json) as lists.
JSON null is nil."
  (let ((all (with-temp-buffer
               (insert-file-contents parley-display-test--cases-file)
               (json-parse-buffer :object-type 'hash-table :null-object nil
                                  :array-type 'list))))
    (or (gethash kind all) (error "No %s cases in %s" kind parley-display-test--cases-file))))

(defmacro parley-display-test--each-case (kind args &rest body)
  "Run BODY for each case of KIND, its values bound to ARGS and `expected'.
A failure names the case."
  (declare (indent 2))
  `(let ((checked 0))
     (dolist (one-case (parley-display-test--cases ,kind))
       (cl-destructuring-bind (,@args expected) one-case
         (ert-info ((format "%s case %S" ,kind one-case))
           ,@body))
       (setq checked (1+ checked)))
     (should (> checked 0))))

(ert-deftest parley-display-shared-cases-tokens ()
  (parley-display-test--each-case "formatTokens" (n)
    (should (equal (parley-display-tokens n) expected))))

(ert-deftest parley-display-shared-cases-cost ()
  (parley-display-test--each-case "formatCost" (amount)
    (should (equal (parley-display-cost amount) expected))))

(ert-deftest parley-display-shared-cases-context ()
  (parley-display-test--each-case "formatContext" (used size)
    (should (equal (parley-display-context used size) expected))))

(ert-deftest parley-display-shared-cases-tool-summary ()
  (parley-display-test--each-case "summarizeToolResult" (text error)
    (should (equal (parley-display-tool-summary text error) expected))))

(ert-deftest parley-display-shared-cases-escape-controls ()
  (parley-display-test--each-case "escapeControls" (text one-line)
    (should (equal (parley-display-escape-controls text (eq one-line t)) expected))))

(ert-deftest parley-display-shared-cases-time ()
  ;; The cases are in UTC, with the file's "now".
  (let* ((spec (parley-display-test--cases "formatTime"))
         (now (encode-time (iso8601-parse (gethash "now" spec))))
         (cases (gethash "cases" spec)))
    (should cases)
    (unwind-protect
        (progn
          (set-time-zone-rule "UTC0")
          (dolist (case cases)
            (ert-info ((format "formatTime case %S" case))
              (should (equal (parley-display-time (car case) now) (cadr case))))))
      (set-time-zone-rule nil))))

(ert-deftest parley-display-tokens-thresholds ()
  (should (equal (parley-display-tokens nil) "0"))
  (should (equal (parley-display-tokens 950) "950"))
  (should (equal (parley-display-tokens 999) "999"))
  (should (equal (parley-display-tokens 1000) "1.0k"))
  (should (equal (parley-display-tokens 1234) "1.2k"))
  (should (equal (parley-display-tokens 12345) "12k"))
  (should (equal (parley-display-tokens 999999) "999k"))
  (should (equal (parley-display-tokens 1234567) "1.2M")))

(ert-deftest parley-display-cost-decimals ()
  (should (equal (parley-display-cost 1.25) "$1.25"))
  (should (equal (parley-display-cost 0.0123) "$0.0123"))
  (should (equal (parley-display-cost 0) "$0"))
  (should (equal (parley-display-cost 0.0) "$0"))
  (should (equal (parley-display-cost nil) "cost unknown")))

(ert-deftest parley-display-context-never-slash-zero ()
  (should (equal (parley-display-context 12000 200000) "context 12k/200k (6%)"))
  (should (equal (parley-display-context 12000 nil) "context 12k"))
  (should (equal (parley-display-context 1264 0) "context 1.3k")))

(ert-deftest parley-display-tool-input-code-and-json ()
  (should (equal (parley-display-tool-input "python_eval" '(:code "print(1)\nprint(2)\n"))
                 '("python" . "print(1)\nprint(2)")))
  (should (equal (parley-display-tool-input "Run Python" '(:code "x = 1"))
                 '("python" . "x = 1")))
  (should (equal (parley-display-tool-input "elisp_eval" '(:form "(+ 1 2)"))
                 '("elisp" . "(+ 1 2)")))
  (should (equal (parley-display-tool-input "run_shell" '(:command "ls -l"))
                 '("sh" . "ls -l")))
  (should (equal (parley-display-tool-input "read_file" '(:path "a.txt" :limit 3 :deep :json-false))
                 '(nil . "{\n  \"path\": \"a.txt\",\n  \"limit\": 3,\n  \"deep\": false\n}")))
  ;; A string with newlines on its own lines, not as \n escapes.
  (should (equal (parley-display-tool-input "write_file" '(:path "a.py" :content "a = 1\nb = 2\n"))
                 '(nil . "{\n  \"path\": \"a.py\",\n  \"content\":\n    a = 1\n    b = 2\n}")))
  (should (equal (parley-display-tool-input "t" '(:items [1 "two"]))
                 '(nil . "{\n  \"items\": [\n    1,\n    \"two\"\n  ]\n}"))))

(ert-deftest parley-display-tool-summary-meaningful-lines ()
  (should (equal (parley-display-tool-summary "stdout:\n42\n\nstderr:\n") "42"))
  (should (equal (parley-display-tool-summary "result:\na\nb\nc\nd") "a\nb\nc"))
  (should (equal (parley-display-tool-summary "  \n") "(no output)"))
  (should (equal (parley-display-tool-summary nil) "(no output)"))
  (should (equal (parley-display-tool-summary (make-string 130 ?x))
                 (concat (make-string 120 ?x) "…")))
  (should (equal (parley-display-tool-summary "stdout:\nsome\n" "NameError: x")
                 "NameError: x\nsome")))

(ert-deftest parley-display-time-today-year-older ()
  (unwind-protect
      (progn
        (set-time-zone-rule "UTC")
        (let* ((now (encode-time (list 0 30 15 22 11 2026 nil nil nil)))
               (today (encode-time (list 0 5 14 22 11 2026 nil nil nil)))
               (this-year (encode-time (list 0 5 14 1 3 2026 nil nil nil)))
               (older (encode-time (list 0 5 14 22 11 2025 nil nil nil))))
          (should (equal (parley-display-time today now) "14:05"))
          (should (equal (parley-display-time this-year now) "Mar 1 14:05"))
          (should (equal (parley-display-time older now) "2025-11-22 14:05"))
          ;; The server's UTC stamps, in local time (here UTC, then UTC+1).
          (should (equal (parley-display-time "2026-11-22T11:37:06.697Z" now) "11:37"))
          (should (equal (parley-display-time "2025-01-02T03:04:05Z" now) "2025-01-02 03:04"))
          (set-time-zone-rule "XXX-1")
          (should (equal (parley-display-time "2026-11-22T11:37:06.697Z" now) "12:37"))
          (should (equal (parley-display-time "not a time" now) "not a time"))))
    (set-time-zone-rule nil)))

(ert-deftest parley-display-tool-summary-on-the-status ()
  ;; A finished call's status says its result's summary when pointed at.
  (require 'parley)
  (let ((buffer (parley--make-buffer temporary-file-directory "sess-display")))
    (unwind-protect
        (with-current-buffer buffer
          (parley--update '(:sessionUpdate "tool_call" :toolCallId "c1" :title "python_eval"
                            :status "in_progress" :rawInput (:code "print(42)")))
          (parley--update '(:sessionUpdate "tool_call_update" :toolCallId "c1" :status "completed"
                            :content [(:type "content"
                                       :content (:type "text" :text "stdout:\n42\n"))]))
          (goto-char (point-min))
          (search-forward "[done]")
          (should (equal (get-text-property (1- (point)) 'help-echo) "42")))
      (kill-buffer buffer))))

(provide 'parley-display-test)
;;; parley-display-test.el ends here
