;;; parley-retry-test.el --- Retry of a cut-off turn; the server's version  -*- lexical-binding: t; -*-

;;; Commentary:

;; `parley-retry' (C-c C-r) after a turn that was cut off (cancelled,
;; or its prompt answered with an error) replaces that turn: the
;; transcript loses it before the prompt is shown again, and the
;; server is asked to replace it (`_meta.parley.retry', docs/protocol.md's
;; contract); after a finished turn it is an ordinary resend.  A
;; server whose version differs from the package's is said once.  The
;; server is faked: the requests are answered from a table, the
;; updates parsed from JSON as jsonrpc.el delivers them.  The same
;; against the real server: parley-integration-retry-test.el.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)
(require 'parley-test)

;;;; Retry

(defun parley-retry-test--answer (outcome turn &optional text replaced)
  "Stream a turn's answer TEXT, then end it with OUTCOME as the server would.
OUTCOME is `done', `cancelled' or `error'; TURN is the session's turn
count the result carries; REPLACED, when non-nil, is the result's
`_meta.parley.replaced' (t or :json-false).  Return what
`session/prompt' answers: its result, or (error . ERR)."
  (parley-test--chunk (or text "An answer.") (format "m%d-%s" turn (random 1000000)))
  (pcase outcome
    ('cancelled
     (parley-test--update "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c1\",\"title\":\"Run Python\",\"kind\":\"execute\",\"status\":\"in_progress\",\"rawInput\":{\"code\":\"print(1)\"}}")
     (parley-test--notice "Stopped." "info")
     (list :stopReason "cancelled" :_meta `(:parley (:session (:turns ,turn)))))
    ('error '(error :code -32001 :message "The provider is overloaded."))
    (_ (list :stopReason "end_turn"
             :_meta `(:parley (:session (:turns ,turn)
                                        ,@(and replaced (list :replaced replaced))))))))

(defmacro parley-retry-test--with-server (answers &rest body)
  "Run BODY in a chat buffer whose prompts are answered by ANSWERS in turn.
ANSWERS is a list of functions of no argument, each streaming a turn
and returning the answer (see `parley-retry-test--answer').
`requests' is bound as in `parley-test--with-fake-server'; `prompts'
returns the `session/prompt' params sent, oldest first."
  (declare (indent 1) (debug t))
  `(let ((answers ,answers))
     (parley-test--with-fake-server
         (list (cons 'session/prompt (lambda (_params) (funcall (pop answers)))))
       (cl-flet ((prompts () (reverse (mapcar #'cdr (cl-remove 'session/prompt requests
                                                                :key #'car :test-not #'eq)))))
         ;; An error's timer (its stderr read later) would outlive the
         ;; fake connection.
         (cl-letf (((symbol-function 'run-at-time) #'ignore))
           (parley-test--with-chat
             (setq parley--conn 'fake-connection)
             ,@body))))))

(defun parley-retry-test--send (text)
  "Type TEXT in the prompt and send it with RET, as the user would."
  (should-not (parley-test--type (current-buffer) (concat (mapconcat #'string text " ") " RET")
                                 (point-max))))

(ert-deftest parley-retry-replaces-cancelled-turn ()
  ;; A finished turn, then one cancelled half-way (a partial answer, a
  ;; tool card, the stop notice); C-c C-r shows one prompt and one answer.
  (parley-retry-test--with-server
      (list (lambda () (parley-retry-test--answer 'done 1 "Hello."))
            (lambda () (parley-retry-test--answer 'cancelled 2 "half an ans"))
            (lambda () (parley-retry-test--answer 'done 2 "The whole answer." t)))
    (parley-retry-test--send "Hi")
    (parley-retry-test--send "Write")
    (should (string-match-p "\nYou\nWrite\n\nParley\nhalf an ans\n\\(.\\|\n\\)*Run Python\\(.\\|\n\\)*\nStopped\\.\n\\'"
                            (parley-test--transcript)))
    ;; Typed since, not sent: C-c C-r leaves it as it is.
    (goto-char (point-max))
    (insert "draft, not sent")
    (should-not (parley-test--type (current-buffer) "C-c C-r"))
    (should (equal (parley-test--visible-transcript)
                   "You\nHi\n\nParley\nHello.\n\nYou\nWrite\n\nParley\nThe whole answer.\n"))
    (should (equal (parley--current-input) "draft, not sent"))
    ;; The server was asked to replace the cut-off turn, with the same blocks.
    (let ((sent (prompts)))
      (should (= (length sent) 3))
      (should-not (plist-member (nth 0 sent) :_meta))
      (should-not (plist-member (nth 1 sent) :_meta))
      (should (equal (plist-get (nth 2 sent) :_meta) '(:parley (:retry t))))
      (should (equal (plist-get (nth 2 sent) :prompt) (plist-get (nth 1 sent) :prompt))))
    ;; The replacement is turn 2, as the cut-off turn was.
    (should (equal (get-text-property (parley-test--pos "You\nWrite") 'parley-turn) 2))
    (should (= parley--turn-count 2))
    (should-not (string-match-p "earlier attempt" (parley-test--transcript)))))

(ert-deftest parley-retry-replaces-failed-turn ()
  ;; A prompt answered with an error: the error (and its Retry hint)
  ;; goes with the turn.
  (parley-retry-test--with-server
      (list (lambda () (parley-retry-test--answer 'error 1 "cut"))
            (lambda () (parley-retry-test--answer 'done 1 "Now whole." t)))
    (parley-retry-test--send "Explain")
    (should (string-match-p "\nError: The provider is overloaded\\.\nRetry: C-c C-r sends the prompt again, in place of this turn\\.\n\\'"
                            (parley-test--transcript)))
    (parley-retry)
    (should (equal (parley-test--transcript) "You\nExplain\n\nParley\nNow whole.\n"))
    (should (equal (plist-get (cadr (prompts)) :_meta) '(:parley (:retry t))))))

(ert-deftest parley-retry-after-refused-prompt-is-a-resend ()
  ;; An error that refused the prompt before its turn began (here: the
  ;; model takes no images) cut nothing off: C-c C-r sends it again as
  ;; a new prompt, and the turn before it, cancelled, stays.
  (parley-retry-test--with-server
      (list (lambda () (parley-retry-test--answer 'cancelled 1 "Hal"))
            (lambda () '(error :code -32602 :message "The model takes no images."))
            (lambda () (parley-retry-test--answer 'done 2 "Seen.")))
    (parley-retry-test--send "Long")
    (parley-retry-test--send "Look")
    (parley-retry)
    (should (string-match-p "\\`You\nLong\n\nParley\nHal\n" (parley-test--transcript)))
    (should (string-match-p "\nParley\nSeen\\.\n\\'" (parley-test--transcript)))
    (should-not (cl-some (lambda (params) (plist-member params :_meta)) (prompts)))))

(ert-deftest parley-retry-after-finished-turn-is-a-resend ()
  ;; After a finished turn, and after a cut-off turn something came
  ;; after, C-c C-r is an ordinary prompt: no `retry', nothing removed.
  (parley-retry-test--with-server
      (list (lambda () (parley-retry-test--answer 'done 1 "One."))
            (lambda () (parley-retry-test--answer 'done 2 "Two."))
            (lambda () (parley-retry-test--answer 'cancelled 3 "Thr"))
            (lambda () (parley-retry-test--answer 'done 4 "Four."))
            (lambda () (parley-retry-test--answer 'done 5 "Five.")))
    (parley-retry-test--send "Ask")
    (parley-retry)
    (should (equal (parley-test--transcript)
                   "You\nAsk\n\nParley\nOne.\n\nYou\nAsk\n\nParley\nTwo.\n"))
    (parley-retry-test--send "Next")
    (parley-retry-test--send "Other")
    (parley-retry)
    (should (string-match-p "\nYou\nNext\n\nParley\nThr\n\\(.\\|\n\\)*\nStopped\\.\n\nYou\nOther\n\nParley\nFour\\.\n\nYou\nOther\n\nParley\nFive\\.\n\\'"
                            (parley-test--transcript)))
    (should-not (cl-some (lambda (params) (plist-member params :_meta)) (prompts)))))

(ert-deftest parley-retry-not-replaced-says-so ()
  ;; The server ran the retry as a new turn (the session changed after
  ;; the cut-off turn): one line says the earlier attempt is kept.
  (parley-retry-test--with-server
      (list (lambda () (parley-retry-test--answer 'cancelled 1 "par"))
            (lambda () (parley-retry-test--answer 'done 3 "Whole." :json-false)))
    (parley-retry-test--send "Go")
    (parley-retry)
    (should (equal (parley-test--transcript)
                   (concat "You\nGo\n\nParley\nWhole.\n" parley--attempt-kept-notice "\n")))
    (should (equal parley--attempt-kept-notice
                   "The earlier attempt is kept: the session changed after it (in another window)."))))

(ert-deftest parley-retry-keeps-what-followed-the-turn ()
  ;; A notice after the cut-off turn (the server restarted) is not the
  ;; turn's: it stays; a slash command's turn after it makes the retry
  ;; an ordinary one.
  (parley-retry-test--with-server
      (list (lambda () (parley-retry-test--answer 'cancelled 1 "par"))
            (lambda () (parley-retry-test--answer 'done 1 "Whole." t))
            (lambda () (parley-retry-test--answer 'cancelled 2 "again par"))
            (lambda () (parley-retry-test--answer 'done 4 "Resent.")))
    (parley-retry-test--send "Go")
    (parley--insert-notice "The Parley server was restarted.")
    (parley-retry)
    (should (equal (parley-test--transcript)
                   "The Parley server was restarted.\n\nYou\nGo\n\nParley\nWhole.\n"))
    (parley-retry-test--send "More")
    (parley--show-command-turn "/undo" "Turn 2 undone.")
    (parley-retry)
    (should (string-match-p "Stopped\\.\n\nYou\n/undo\n\nParley\nTurn 2 undone\\.\n\nYou\nMore\n\nParley\nResent\\.\n\\'"
                            (parley-test--transcript)))
    (should (equal (mapcar (lambda (p) (plist-get p :_meta)) (prompts))
                   '(nil (:parley (:retry t)) nil nil)))))

(ert-deftest parley-retry-after-undo-is-a-resend ()
  ;; `C-c C-u' after the cut-off turn changed the session: the retry is
  ;; an ordinary one, and the cut-off turn stays in the transcript.
  (parley-retry-test--with-server
      (list (lambda () (parley-retry-test--answer 'cancelled 1 "par"))
            (lambda () (parley-retry-test--answer 'done 2 "Again.")))
    (parley-retry-test--send "Go")
    (parley--turn-undone 1 '(:files [] :text "Turn 1 left no files to restore."))
    (parley-retry)
    (should (string-match-p "\\`You\nGo\n\nParley\npar\n\\(.\\|\n\\)*Stopped\\.\n\\[Turn 1 left no files to restore\\.\\]\n\nYou\nGo\n\nParley\nAgain\\.\n\\'"
                            (parley-test--transcript)))
    (should-not (cl-some (lambda (params) (plist-member params :_meta)) (prompts)))))

(ert-deftest parley-retry-property-random-sequences ()
  ;; Property: whatever the order of finished, cancelled and failed
  ;; turns, prompts and retries, a retry asks to replace exactly when
  ;; the last turn was cut off; the transcript then shows each kept
  ;; turn once (a replaced one not at all); the prompt being typed stays.
  (random "parley-retry-property")     ; the same cases each run
  (progn
    (dotimes (_case 40)
      (let* ((steps (cl-loop repeat (1+ (random 7))
                             collect (nth (random 4) '(done cancelled error retry))))
             (outcomes (cl-loop for step in steps
                                collect (if (eq step 'retry)
                                            (nth (random 3) '(done cancelled error))
                                          step)))
             (plan outcomes)
             (expected nil)         ; the shown turns, newest first: (TEXT . OUTCOME)
             (last-text nil))
        (parley-retry-test--with-server
            (mapcar (lambda (outcome)
                      (lambda () (parley-retry-test--answer outcome 1 "A.")))
                    outcomes)
          (cl-loop
           for step in steps
           for n from 1
           for outcome = (pop plan)
           for text = (format "p%d" n)
           do (let ((cut-off (memq (cdr (car expected)) '(cancelled error))))
                (goto-char (point-max))
                (insert "draft")
                (if (and (eq step 'retry) last-text)
                    (progn
                      (parley-retry)
                      (should (equal (plist-get (car (last (prompts))) :_meta)
                                     (and cut-off '(:parley (:retry t)))))
                      (when cut-off (pop expected))
                      (push (cons last-text outcome) expected))
                  (when (eq step 'retry)  ; nothing to retry yet: a prompt
                    (setq step outcome))
                  (parley--set-input text)
                  (parley-send)
                  (setq last-text text)
                  (push (cons text outcome) expected))
                (should (equal (parley--current-input)
                               (if (and (eq step 'retry) last-text) "draft" "")))
                (parley--set-input "")
                (let ((shown (parley-test--transcript)))
                  (should (equal (cl-loop for start = 0 then (match-end 0)
                                          while (string-match "^You\n\\(p[0-9]+\\)\n" shown start)
                                          collect (match-string 1 shown))
                                 (reverse (mapcar #'car expected))))))))))))

(provide 'parley-retry-test)
;;; parley-retry-test.el ends here
