;;; parley-integration-retry-test.el --- Retry and the server's version against the real server  -*- lexical-binding: t; -*-

;;; Commentary:

;; Retry (docs/protocol.md, `session/prompt`) against `parley serve' and the fake LLM: a
;; retry of a cut-off turn replaces it, in the buffer, in what the
;; model is sent and in the stored session; a server of another
;; version than the package's is said once.  The server, the fake LLM
;; and the helpers are those of parley-integration-test.el; the fake
;; server's tests are in parley-retry-test.el and parley-version-test.el.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley-integration-test)   ; parley, parley-test and the real server's helpers

(defun parley-it--last-messages ()
  "Return the messages of the last request the model got, as (ROLE . TEXT)."
  (cl-loop for message across (plist-get (plist-get (car (last (parley-it--requests))) :body)
                                         :messages)
           for content = (plist-get message :content)
           collect (cons (plist-get message :role)
                         (if (stringp content) content (format "%S" content)))))

(defun parley-it--cancel-a-long-answer (prompt)
  "Send PROMPT, whose answer streams slowly, and cancel it once it started."
  (parley-it--script
   (list :text (make-string 2000 ?a) :chunk_size 2
         :pacing (list :chunks_per_second 40)))
  (parley-it--send prompt)
  (parley-it--wait (lambda () (string-match-p "aaaa" (parley-it--transcript)))
                   "the first chunks")
  (parley-cancel)
  (parley-it--wait-idle 10)
  (should (string-match-p "a\nStopped\\.\n\\'" (parley-it--transcript))))

(parley-it--deftest parley-it-retry-replaces-cut-off-turn
  "C-c C-r after a cancelled turn replaces it: one prompt, one answer, for the model and stored."
  ;; Needs the server's side of the contract (`_meta.parley.retry').
  (let (session-id)
    (with-current-buffer (parley t)
      (setq session-id parley--session-id)
      (parley-it--cancel-a-long-answer "Write a lot")
      (parley-it--script (list :text "Done."))
      (goto-char (point-max))
      (insert "a draft")
      (should-not (parley-test--type (current-buffer) "C-c C-r"))
      (parley-it--wait-idle)
      (should (equal (parley-it--transcript) "You\nWrite a lot\n\nParley\nDone.\n"))
      (should (equal (parley--current-input) "a draft"))
      ;; The model got the prompt once, without the cut-off answer.
      (let ((messages (parley-it--last-messages)))
        (should (= (cl-count "user" messages :key #'car :test #'equal) 1))
        (should (string-match-p "Write a lot" (cdr (assoc "user" messages))))
        (should-not (assoc "assistant" messages)))
      ;; After a finished turn, C-c C-r is a new turn of the same prompt.
      (parley-it--script (list :text "Again."))
      (parley-retry)
      (parley-it--wait-idle)
      (should (equal (parley-it--transcript)
                     "You\nWrite a lot\n\nParley\nDone.\n\nYou\nWrite a lot\n\nParley\nAgain.\n"))
      (should (= (cl-count "user" (parley-it--last-messages) :key #'car :test #'equal) 2))
      (kill-buffer))
    ;; Stored so: the reopened session shows what the buffer showed.
    (with-current-buffer (parley-open-session session-id
                                              (directory-file-name parley-it--workspace))
      (parley-it--wait-idle 30)
      (should (equal (parley-it--transcript)
                     "You\nWrite a lot\n\nParley\nDone.\n\nYou\nWrite a lot\n\nParley\nAgain.\n")))))

(parley-it--deftest parley-it-retry-after-error-replaces-it
  "C-c C-r after a provider error replaces the failed turn, for the model too."
  ;; Needs the server's side of the contract (`_meta.parley.retry').
  (with-current-buffer (parley t)
    (parley-it--send-failing "Explain")
    (should (string-match-p "Retry: C-c C-r sends the prompt again, in place of this turn\\.\n\\'"
                            (parley-it--transcript)))
    (parley-it--script (list :text "Explained."))
    (parley-retry)
    (parley-it--wait-idle)
    (should (equal (parley-it--transcript) "You\nExplain\n\nParley\nExplained.\n"))
    (should (equal (mapcar #'car (cl-remove "system" (parley-it--last-messages)
                                            :key #'car :test #'equal))
                   '("user")))))

(parley-it--deftest parley-it-version-differs-said-once
  "A server of another version than the package's is said once: echo area and first chat buffer."
  (let ((parley--version-said nil)
        (parley--version-notice nil)
        (said nil))
    (cl-flet ((record (format-string &rest args)
                (when format-string
                  (push (apply #'format-message format-string args) said))))
      (advice-add 'message :before #'record)
      (unwind-protect
          (let* ((parley-version "9.9.9")
                 (first (parley t))
                 (server (plist-get (plist-get parley--server-info :agentInfo) :version))
                 (notice (format "Parley server %s differs from parley.el 9.9.9: update the \
server (M-x parley-install-server) or the package." server))
                 (count (lambda () (cl-count notice said :test #'equal))))
            (should (stringp server))
            (should (= (funcall count) 1))
            (with-current-buffer first
              (should (equal (parley-it--transcript) (concat notice "\n"))))
            ;; A second session: not again.
            (with-current-buffer (parley t)
              (should (equal (parley-it--transcript) "")))
            ;; A restart, to a server of the same version: not again.
            (parley-restart)
            (should (= (funcall count) 1))
            (with-current-buffer first
              (should (equal (parley-it--transcript)
                             (concat notice "\nThe Parley server was restarted.\n"))))
            ;; The package of the server's version: nothing.
            (let ((parley-version server))
              (setq said nil)
              (parley-restart)
              (should-not (cl-find-if (lambda (m) (string-match-p " differs from parley\\.el " m))
                                      said))))
        (advice-remove 'message #'record)))))

(provide 'parley-integration-retry-test)
;;; parley-integration-retry-test.el ends here
