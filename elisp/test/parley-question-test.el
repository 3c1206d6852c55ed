;;; parley-question-test.el --- Unit tests of permission questions (parley-question.el)  -*- lexical-binding: t; -*-

;;; Commentary:

;; Questions asked inline in the transcript, over a loopback
;; connection: answered only by their keys, cancelled with their turn
;; or their buffer.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)
(require 'parley-test)

;;;; Permission questions, asked inline

(defconst parley-test--permission
  '(:sessionId "sess-unit"
               :toolCall (:toolCallId "call_9" :title "python_eval" :kind "execute"
                                      :rawInput (:code "import os\nos.remove('precious.txt')"))
               :options [(:optionId "allow" :name "Allow once" :kind "allow_once")
                         (:optionId "always" :name "Allow always" :kind "allow_always")
                         (:optionId "reject" :name "Reject" :kind "reject_once")])
  "A permission request as the server sends it.")

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

(ert-deftest parley-permission-one-key-outside-the-prompt ()
  ;; Issue 42: `y', `n' and `!' answer the waiting question wherever
  ;; point is in the transcript (here: the banner, and the line where
  ;; the question appeared); in the prompt they are letters of it.
  (parley-test--with-chat
    (let ((chat (current-buffer)))
      (parley-test--with-loopback
        (parley-test--no-minibuffer
          (pcase-dolist (`(,key ,where ,option ,line)
                         '(("y" banner "allow" "Allowed once: python_eval")
                           ("n" output "reject" "Rejected: python_eval")
                           ("!" banner "always" "Allowed always: python_eval")))
            (let ((answer (parley-test--request conn 'session/request_permission
                                                parley-test--permission))
                  (pos (if (eq where 'banner) (point-min) parley--output)))
              (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
              (should (string-search "(press the key anywhere outside the prompt"
                                     (parley-test--visible-transcript)))
              ;; Typed in the prompt: a letter, no answer.
              (should-not (parley-test--type chat key (with-current-buffer chat (point-max))))
              (parley-test--settle)
              (should (eq (car answer) 'pending))
              (should (equal (parley--current-input) key))
              (parley--set-input "")
              ;; Typed outside the prompt, not in the question: the answer.
              (should-not (parley--question-at pos))
              (should-not (parley-test--type chat key pos))
              (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
              (should (equal (car answer) `(:outcome (:outcome "selected" :optionId ,option))))
              (should (string-match-p (concat (regexp-quote line) "\n\\'")
                                      (parley-test--transcript)))
              (should (equal (parley--current-input) ""))))
          ;; Nothing waits: outside the prompt the key says so, answers nothing.
          (should (eq (car (parley-test--type chat "y" (point-min))) 'user-error)))))))

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

(ert-deftest parley-permission-rejected-with-a-note-for-the-model ()
  ;; Issue 43: `N' rejects with the user's words, sent as
  ;; `_meta.parley.note' (the model reads them with the rejection); in
  ;; the question or anywhere outside the prompt (RET in the question
  ;; says so).  An empty note is a plain rejection.
  (parley-test--with-chat
    (let ((chat (current-buffer)))
      (parley-test--with-loopback
        (pcase-dolist (`(,where ,typed ,sent)
                       '((question "  use pathlib instead " (:_meta (:parley (:note "use pathlib instead"))))
                         (banner "" nil)))
          (let ((answer (parley-test--request conn 'session/request_permission
                                              parley-test--permission)))
            (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
            (cl-letf (((symbol-function 'read-string) (lambda (&rest _) typed)))
              (should-not (parley-test--type chat "N" (if (eq where 'banner) (point-min)
                                                         (parley-test--question-pos)))))
            (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
            (should (equal (car answer)
                           `(:outcome (:outcome "selected" :optionId "reject") ,@sent)))
            (should (string-match-p "Rejected: python_eval\n\\'" (parley-test--transcript)))))))))

(defconst parley-test--command-permission
  '(:sessionId "sess-unit"
               :toolCall (:toolCallId "call_7" :title "Run `git status --short`" :kind "execute"
                                      :rawInput (:command "git status --short")
                                      :locations [(:path "/srv/project")]
                                      :content [(:type "content"
                                                       :content (:type "text"
                                                                       :text "```sh\ngit status --short\n```"))])
               :options [(:optionId "allow_once" :name "Allow once" :kind "allow_once")
                         (:optionId "allow_always:git status"
                                    :name "Always allow `git status` here" :kind "allow_always")
                         (:optionId "allow_always:git"
                                    :name "Always allow `git` here" :kind "allow_always")
                         (:optionId "reject_once" :name "Reject" :kind "reject_once")])
  "A command's permission request: one `allow_always' option per prefix.")

(ert-deftest parley-permission-command-prefixes-each-chosen ()
  ;; Each prefix offered is a choice of its own: `a' the first (the most
  ;; specific), `A' the second, or a click on either.
  (parley-test--with-chat
    (let ((chat (current-buffer)))
      (parley-test--with-loopback
        (parley-test--no-minibuffer
          (pcase-dolist (`(,how ,option)
                         '(("a" "allow_always:git status")
                           ("A" "allow_always:git")
                           (click "allow_always:git")))
            (let ((answer (parley-test--request conn 'session/request_permission
                                                parley-test--command-permission)))
              (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
              ;; Its directory; the command once, as code: not again in its fence.
              (should (string-match-p
                       "Parley asks permission: Run `git status --short` (execute)\n    /srv/project\n    git status --short\n  \\[y\\]"
                       (parley-test--visible-transcript)))
              (should-not (string-search "```" (parley-test--visible-transcript)))
              (should (string-match-p
                       (concat "  \\[y\\] Allow once   \\[a\\] Always allow `git status` here   "
                               "\\[A\\] Always allow `git` here   \\[n\\] Reject\n")
                       (parley-test--visible-transcript)))
              (if (stringp how)
                  (should-not (parley-test--type chat how (parley-test--question-pos)))
                (set-window-buffer (selected-window) chat)
                (let ((pos (let ((case-fold-search nil)) (parley-test--pos "[A] Always"))))
                  (parley-question-click
                   (list 'mouse-1 (list (selected-window) pos '(0 . 0) 0 nil pos)))))
              (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
              (should (equal (car answer) `(:outcome (:outcome "selected" :optionId ,option)))))))
        ;; With one prefix, `A' offers nothing and answers nothing.
        (let* ((one (vconcat (cl-remove "allow_always:git"
                                        (plist-get parley-test--command-permission :options)
                                        :key (lambda (o) (plist-get o :optionId))
                                        :test #'equal)))
               (answer (parley-test--request
                        conn 'session/request_permission
                        (plist-put (copy-sequence parley-test--command-permission)
                                   :options one))))
          (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
          (should-not (string-search "[A]" (parley-test--visible-transcript)))
          (should (eq (car (parley-test--type chat "A" (parley-test--question-pos))) 'user-error))
          (parley-test--settle)
          (should (eq (car answer) 'pending))
          (parley--cancel-questions))))))

(ert-deftest parley-permission-shows-controls-and-bidi-escaped ()
  ;; A title, a command, a path: their control and bidi characters are
  ;; shown as escapes (docs/display.md), so none hides code or reorders
  ;; itself; the question's answered line too.
  (parley-test--with-chat
    (let ((chat (current-buffer)))
      (parley-test--with-loopback
        (parley-test--no-minibuffer
          (let ((answer (parley-test--request
                         conn 'session/request_permission
                         (list :sessionId "sess-unit"
                               :toolCall
                               (list :toolCallId "b1" :title "Run `ls \u202e;hs.lave`"
                                     :kind "execute"
                                     :rawInput (list :command "printf '\e]52;c;eA==\a' \u2066x")
                                     :locations (vector (list :path "/srv/\u202edir")))
                               :options (vector '(:optionId "no" :name "Reject"
                                                            :kind "reject_once"))))))
            (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
            (let ((shown (parley-test--visible-transcript)))
              (should (string-search
                       "Parley asks permission: Run `ls \\u202e;hs.lave` (execute)" shown))
              (should (string-search "printf '\\x1b]52;c;eA==\\x07' \\u2066x" shown))
              (should (string-search "/srv/\\u202edir" shown))
              (should-not (string-match-p "[\e\a\u202e\u2066]" shown)))
            (should-not (parley-test--type chat "n" (parley-test--question-pos)))
            (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
            (should (string-search "Rejected: Run `ls \\u202e;hs.lave`"
                                   (parley-test--visible-transcript)))))))))

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
                 ;; Issue 42: the diff alone, not the raw input above it.
                 (concat "Parley asks permission: Edit notes.txt (edit)\n"
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

(provide 'parley-question-test)
;;; parley-question-test.el ends here
