;;; parley-integration-daily-test.el --- Daily use against the real server (issue 26)  -*- lexical-binding: t; -*-

;;; Commentary:

;; Against `parley serve' and the fake LLM (the helpers of
;; parley-integration-test.el): the stored sessions' picker, one line
;; per session with its model, turns and cost, and deleting one; a
;; reopened session showing its edits (their diffs) and its `/undo'
;; as they were shown live; `M-x parley' offering the project's last
;; session (issue 42).

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley-integration-test)   ; parley, parley-test and the real server's helpers

(defun parley-it-daily--offered ()
  "Return the lines the session picker offers (the completion is quit).
Nil when there is no stored session."
  (let (offered)
    (cl-letf (((symbol-function 'completing-read)
               (lambda (_prompt collection &rest _)
                 (setq offered (all-completions "" collection))
                 (signal 'quit nil))))
      (condition-case nil (parley-sessions) (quit nil) (user-error nil)))
    offered))

(parley-it--deftest parley-it-picker-one-line-per-session-and-delete
  "The picker shows each session's title, model, turns and cost; one can be deleted."
  (let ((prompts '("Daily first question" "Daily second question"))
        (before (length (parley-it-daily--offered)))
        (ids nil))
    (dolist (prompt prompts)
      (parley-it--script (list :text "Answered." :usage [1000 200]))
      (with-current-buffer (parley t)
        (parley-it--send prompt)
        (parley-it--wait-idle)
        (push parley--session-id ids)))
    (let ((offered (parley-it-daily--offered)))
      (should (= (length offered) (+ before 2)))
      ;; Title, model, turns and cost on the line, the time last.
      (dolist (prompt prompts)
        (should (cl-find-if
                 (lambda (line)
                   (string-match-p
                    (concat "\\`" prompt "  openai:gpt-4\\.1-mini  1 turn  \\$[0-9.]+  "
                            "[0-2][0-9]:[0-5][0-9]\\'")
                    line))
                 offered))))
    ;; Delete the first: asked, then gone from the store and the picker.
    (let ((asked nil))
      (cl-letf (((symbol-function 'completing-read)
                 (lambda (_prompt collection &rest _)
                   (cl-find-if (lambda (line) (string-prefix-p (car prompts) line))
                               (all-completions "" collection))))
                ((symbol-function 'yes-or-no-p)
                 (lambda (question) (setq asked question) t)))
        (should (equal (parley-delete-session) (cadr ids))))
      (should (string-match-p "\\`Delete the stored session Daily first question " asked))
      (should-not (gethash (cadr ids) parley--sessions))
      (let ((offered (parley-it-daily--offered)))
        (should (= (length offered) (+ before 1)))
        (should-not (cl-find-if (lambda (line) (string-prefix-p (car prompts) line)) offered)))
      (should-error (parley--request parley--connection 'session/load
                                     (list :sessionId (cadr ids)
                                           :cwd (directory-file-name parley-it--workspace)
                                           :mcpServers []))
                    :type 'jsonrpc-error))))

(parley-it--deftest parley-it-replay-shows-edits-and-undo-as-live
  "A reopened session shows its edit as `Edited' with its diff, and its undo where it was."
  (let ((file (expand-file-name "replayed.py" parley-it--workspace))
        (visiting nil) (session-id nil) (live nil) (live-diff nil))
    (unwind-protect
        (progn
          (with-current-buffer (parley t)
            (setq session-id parley--session-id
                  visiting (parley-it--edit-turn file))
            (goto-char (parley-test--pos "Edited"))
            (setq live-diff (with-current-buffer (parley-show-diff) (buffer-string)))
            ;; C-c C-u: the server keeps it as `/undo' is kept.
            (parley-undo-turn)
            (parley-it--wait (lambda () (string-match-p "- `replayed\\.py` restored\n\\'"
                                                        (parley-it--transcript)))
                             "the turn undone")
            (setq live (parley-test--visible-transcript))
            (kill-buffer))
          (with-current-buffer (parley-open-session session-id
                                                    (directory-file-name parley-it--workspace))
            (parley-it--wait-idle 30)
            (let ((replayed (parley-test--visible-transcript))
                  (edited "▸ Edited replayed\\.py \\+1 −1\n")
                  (undone "\n\nYou\n/undo\n\nParley\nRestored the files of turn 1 [^\n]*\n- `replayed\\.py` restored\n"))
              (should (string-match-p edited live))
              (should (string-match-p edited replayed))
              (should (string-match-p undone live))
              (should (string-match-p undone replayed)))
            ;; C-c C-d on the replayed edit: its diff, the file's lines.
            (goto-char (parley-test--pos "Edited"))
            (let ((diff (with-current-buffer (parley-show-diff) (buffer-string))))
              (should (string-match-p "^@@ -1,1 \\+1,1 @@\n-value = 1\n\\+value = 2\n" diff))
              (should (string-match-p "^@@ -1,1 \\+1,1 @@\n-value = 1\n\\+value = 2\n" live-diff)))))
      (when (buffer-live-p visiting)
        (with-current-buffer visiting (set-buffer-modified-p nil))
        (kill-buffer visiting)))))

(parley-it--deftest parley-it-m-x-parley-offers-the-last-session
  "Issue 42: `M-x parley' offers the project's last session; `C-u' starts a new one."
  (let ((asked nil) (answer t) (session-id nil))
    (parley-it--script (list :text "Resumable answer." :usage [1000 200]))
    (with-current-buffer (parley t)
      (parley-it--send "Resume me later")
      (parley-it--wait-idle)
      (setq session-id parley--session-id)
      (kill-buffer))
    (cl-letf (((symbol-function 'y-or-n-p)
               (lambda (question) (push question asked) answer)))
      ;; No chat buffer of the project: asked, yes resumes it, replayed.
      (with-current-buffer (parley)
        (should (string-match-p "\\`Resume the last session of this project, Resume me later "
                                (car asked)))
        (should (equal parley--session-id session-id))
        (parley-it--wait-idle 30)
        (should (string-match-p "Resume me later\n\n.*\nResumable answer\\."
                                (parley-test--visible-transcript)))
        ;; While its buffer lives, M-x parley goes there, asking nothing.
        (should (eq (parley) (current-buffer)))
        (should (= (length asked) 1))
        (kill-buffer))
      ;; No: a new, empty session.
      (setq answer nil)
      (with-current-buffer (parley)
        (should (= (length asked) 2))
        (should-not (equal parley--session-id session-id))
        (should-not (string-search "Resume me later" (parley-test--visible-transcript))))
      ;; C-u M-x parley: a new session, nothing asked.
      (with-current-buffer (parley t)
        (should (= (length asked) 2))
        (should-not (equal parley--session-id session-id))))))

(parley-it--deftest parley-it-refused-command-not-kept
  "Issue 42: `/mode pl' is said to be no mode, and is neither a turn nor exported."
  (parley-it--script (list :text "First answer." :usage [1000 200]))
  (with-current-buffer (parley t)
    (parley-it--send "A first question")
    (parley-it--wait-idle)
    (parley-it--send "/mode pl")
    (parley-it--wait-idle)
    (let ((shown (parley-test--visible-transcript)))
      ;; The server's words stay; the command does not.
      (should (string-match-p "First answer\\.\n+No mode 'pl'\\. The mode is still `ask`" shown))
      (should-not (string-search "/mode pl" shown))
      (should (= (cl-count-if (lambda (line) (equal line "You")) (split-string shown "\n")) 1)))
    ;; M-p brings it back, to be fixed.
    (parley-previous-input 1)
    (should (equal (parley--current-input) "/mode pl"))
    (parley--set-input "")
    ;; A command that works stays a turn of its own, and is exported.
    (parley-it--send "/mode plan")
    (parley-it--wait-idle)
    (should (string-search "You\n/mode plan\n" (parley-test--visible-transcript)))
    (let ((exported (plist-get (parley--request parley--connection '_parley/session/export
                                                (list :sessionId parley--session-id
                                                      :format "markdown"))
                               :text)))
      (should (string-search "`/mode plan`" exported))
      (should-not (string-search "/mode pl`" exported))
      (should-not (string-search "No mode" exported)))))

(parley-it--deftest parley-it-redo-puts-the-undone-edit-back
  "C-c C-y after C-c C-u puts the edit back, with the server's report in the transcript."
  (let ((file (expand-file-name "redone.py" parley-it--workspace))
        (visiting nil))
    (unwind-protect
        (with-current-buffer (parley t)
          (setq visiting (parley-it--edit-turn file))
          (parley-undo-turn)
          (parley-it--wait (lambda () (string-match-p "- `redone\\.py` restored\n\\'"
                                                      (parley-it--transcript)))
                           "the turn undone")
          (should (equal (parley-it--file-text file) "value = 1\n"))
          (parley-redo-turn)
          (parley-it--wait (lambda () (string-match-p "\n\nYou\n/redo\n\nParley\nPut back \
what turn [0-9]+ and the later turns did:\n- `redone\\.py` restored\n\\'"
                                                      (parley-it--transcript)))
                           "the undo undone")
          (parley-it--wait (lambda () (equal (with-current-buffer visiting (buffer-string))
                                             "value = 2\n"))
                           "the buffer put back")
          (should (equal (parley-it--file-text file) "value = 2\n")))
      (when (buffer-live-p visiting)
        (with-current-buffer visiting (set-buffer-modified-p nil))
        (kill-buffer visiting)))))

(provide 'parley-integration-daily-test)
;;; parley-integration-daily-test.el ends here
