;;; parley-integration-markdown-test.el --- Markdown, code blocks, export against the real server  -*- lexical-binding: t; -*-

;;; Commentary:

;; The integration tests of what an answer looks like and what leaves
;; the transcript: Markdown fontified while it streams, code blocks
;; copied or inserted, the Markdown export, retry.  The server, the
;; fake LLM and the helpers are those of parley-integration-test.el.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley-integration-test)   ; parley, parley-test and the real server's helpers

;;;; Markdown while it streams, code blocks, export, retry

(defun parley-it--face-at (string)
  "Return the faces (a list) at the start of STRING in the transcript."
  (let* ((pos (save-excursion (goto-char parley--start)
                              (search-forward string parley--output t)
                              (match-beginning 0)))
         (face (and pos (get-text-property pos 'face))))
    (if (listp face) face (list face))))

(parley-it--deftest parley-it-markdown-while-streaming
  "Headings, inline code, a Python block and a link carry their faces while the turn streams."
  (should-not (featurep 'markdown-mode))
  (parley-it--script
   (list :chunks (vconcat
                  ["# Plan\n" "Run `pip install` first.\n" "```python\n"
                   "def greet():\n" "    return 'hi'\n" "```\n"
                   "See [the docs](https://example.com/docs).\n"]
                  (make-vector 30 "more "))
         :pacing (list :chunks_per_second 12)))
  (with-current-buffer (parley t)
    (parley-it--send "Show me")
    (parley-it--wait (lambda () (string-match-p "example.com/docs)\\.\n" (parley-it--transcript)))
                     "the link's line")
    ;; In the middle of the stream: the turn goes on.
    (should parley--busy)
    (should (memq 'parley-markdown-heading (parley-it--face-at "Plan")))
    (should (memq 'parley-markdown-code (parley-it--face-at "pip install")))
    (should (memq 'font-lock-keyword-face (parley-it--face-at "def greet")))
    (should (memq 'font-lock-string-face (parley-it--face-at "'hi'")))
    (let ((link (parley-test--pos "the docs")))
      (should (button-at link))
      (should (eq (save-excursion (goto-char link) (key-binding (kbd "RET"))) 'push-button))
      (let (followed)
        (cl-letf (((symbol-function 'browse-url) (lambda (url &rest _) (setq followed url))))
          (push-button link))
        (should (equal followed "https://example.com/docs"))))
    (parley-it--wait-idle)
    (should (string-match-p "docs)\\.\n\\(more \\)\\{30\\}\n\\'" (parley-it--transcript)))
    ;; Copy: with point in the prompt, the last block.
    (goto-char (point-max))
    (should (equal (parley-copy-code-block) "def greet():\n    return 'hi'"))
    (should (equal (car kill-ring) "def greet():\n    return 'hi'"))))

(parley-it--deftest parley-it-export-and-retry
  "A provider failure says how to retry; `parley-retry' resends the prompt in its place; export writes Markdown."
  (with-current-buffer (parley t)
    (parley-it--send-failing "Explain **this**")
    (should (string-match-p "Error: .*\nRetry: C-c C-r sends the prompt again, in place of this turn\\.\n\\'"
                            (parley-it--transcript)))
    (parley-it--script (list :text "## Done\nIt works."))
    (let ((before (length (parley-it--requests))))
      (parley-retry)
      (parley-it--wait-idle)
      (should (= (length (parley-it--requests)) (1+ before))))
    ;; The same prompt, sent again, shown once: the failed turn is gone.
    (should (equal (plist-get (car (last (append (plist-get (plist-get (car (last (parley-it--requests)))
                                                                          :body)
                                                               :messages)
                                                 nil)))
                              :content)
                   "Explain **this**"))
    (should (equal (parley-it--transcript) "You\nExplain **this**\n\nParley\n## Done\nIt works.\n"))
    (should (memq 'parley-markdown-heading (parley-it--face-at "Done")))
    ;; The server's Markdown (`parley export' prints the same), where the user said.
    (let ((file (expand-file-name "talk.md" parley-it--workspace))
          (server (plist-get (parley--request parley--conn '_parley/session/export
                                              (list :sessionId parley--session-id))
                             :text)))
      (parley-export file)
      (let ((text (parley-it--file-text file)))
        (should (equal text server))
        (should (string-match-p "^## You\n+Explain \\*\\*this\\*\\*\n" text))
        (should (string-match-p "It works\\." text))))))

(parley-it--deftest parley-it-crash-shows-its-own-stderr
  "After a crash the buffer shows what the server wrote since, not an older, handled error's log."
  (parley-it--script (list :text "never" :fault (list :kind "http" :status 400 :times 1)))
  ;; At INFO the server logs the error it answered (at its default level, WARNING, an
  ;; error the client was told is not logged at all).
  (let ((parley-server-environment
         (cons "PARLEY_LOG_LEVEL=INFO" parley-server-environment)))
    (with-current-buffer (parley t)
      (let ((stderr (jsonrpc-stderr-buffer parley--connection)))
        (parley-it--send "Fail first")
        (parley-it--wait-idle)
        (should (string-match-p "Error: " (parley-it--transcript)))
        ;; The server logged the error it answered (INFO on stderr).
        (parley-it--wait (lambda () (with-current-buffer stderr
                                      (string-match-p "openai answered 400" (buffer-string))))
                         "the server's log of the error")
        (let ((until (+ (float-time) 1.5)))
          (while (< (float-time) until) (accept-process-output nil 0.05)))
        (signal-process (jsonrpc--process parley--connection) 'kill)
        (parley-it--wait (lambda () (string-match-p "The Parley server exited" (parley-it--transcript)))
                         "the report of the crash")
        ;; Before: the crash report quoted the last lines of stderr, that log line.
        (should-not (string-match-p "The Parley server exited[^\0]*openai answered 400"
                                    (parley-it--transcript)))))))

(parley-it--deftest parley-it-cancelled-mark-replayed
  "A cancelled turn keeps its mark in the transcript and when the session is reopened."
  (parley-it--script
   (list :text (make-string 2000 ?a) :chunk_size 2
         :pacing (list :chunks_per_second 40)))
  (let (session-id)
    (with-current-buffer (parley t)
      (setq session-id parley--session-id)
      (parley-it--send "Write a lot")
      (parley-it--wait (lambda () (string-match-p "aaaa" (parley-it--transcript)))
                       "the first chunks")
      (parley-cancel)
      (parley-it--wait-idle 5)
      (should (string-match-p "a\nStopped\\.\n\\'" (parley-it--transcript)))
      (should (eq (get-text-property (- parley--output 3) 'face) 'parley-notice))
      (kill-buffer))
    (with-current-buffer (parley-open-session session-id
                                              (directory-file-name parley-it--workspace))
      (parley-it--wait-idle 30)
      (should (string-match-p "You\nWrite a lot\n\nParley\naaa+\nStopped\\.\n\\'"
                              (parley-it--transcript))))))

(parley-it--deftest parley-it-picker-shows-local-times
  "The session picker shows readable local times, not the server's UTC stamps."
  (parley-it--script (list :text "Stored."))
  (with-current-buffer (parley t)
    (parley-it--send "Keep me")
    (parley-it--wait-idle))
  (let (offered)
    (cl-letf (((symbol-function 'completing-read)
               (lambda (_prompt collection &rest _)
                 (setq offered (all-completions "" collection))
                 (signal 'quit nil))))
      (condition-case nil (parley-sessions) (quit nil)))
    (should offered)
    (dolist (label offered)
      (should-not (string-match-p "[0-9]T[0-9]\\|Z\\'" label))
      ;; Today's: the time alone.
      (should (string-match-p "  [0-2][0-9]:[0-5][0-9]\\(  \\[sess_[^]]*\\]\\)?\\'" label)))))

(provide 'parley-integration-markdown-test)
;;; parley-integration-markdown-test.el ends here
