;;; parley-daily-test.el --- What a daily user trips over (issue 26)  -*- lexical-binding: t; -*-

;;; Commentary:

;; Unit tests of the chat buffer's daily use: the key that goes to a
;; waiting question from another buffer, `%' in the header line, the
;; keys gptel users type, the prompt queue, the buffer's name and its
;; modified flag.  No server: synthetic updates, the `cat' loopback.
;; The stored sessions, replay and export against the real server are
;; in parley-integration-daily-test.el.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)
(require 'parley-test)

;;;; The key to a waiting question, from where the user is

(defconst parley-daily-test--permission
  '(:sessionId "sess-unit"
               :toolCall (:toolCallId "call_7" :title "python_eval" :kind "execute"
                                      :rawInput (:code "print(1)"))
               :options [(:optionId "allow" :name "Allow once" :kind "allow_once")
                         (:optionId "reject" :name "Reject" :kind "reject_once")])
  "A permission request as the server sends it.")

(defmacro parley-daily-test--capturing-messages (&rest body)
  "Run BODY with `messages' bound to the echo area's messages, newest first."
  (declare (indent 0) (debug t))
  `(let ((messages nil))
     (cl-letf* ((message-function (symbol-function 'message))
                ((symbol-function 'message)
                 (lambda (format &rest args)
                   (when format (push (apply #'format-message format args) messages))
                   (apply message-function format args))))
       ,@body)))

(ert-deftest parley-daily-hint-names-a-key-that-works-where-the-user-is ()
  (let ((elsewhere (generate-new-buffer "parley-elsewhere"))
        (was-on (bound-and-true-p parley-global-mode)))
    (unwind-protect
        (parley-test--with-chat
          (let ((chat (current-buffer)))
            (when was-on (parley-global-mode -1))
            (set-window-buffer (selected-window) elsewhere)
            (parley-test--with-loopback
              (parley-daily-test--capturing-messages
                (parley-test--request conn 'session/request_permission
                                      parley-daily-test--permission)
                (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
                ;; Typed in the other buffer, where no Parley key is bound:
                ;; the hint names the command, not the chat buffer's C-c C-q.
                (let ((hint (cl-find-if (lambda (m) (string-match-p "waiting for you" m))
                                        messages)))
                  (should hint)
                  (should (string-match-p "M-x parley-goto-question goes to its question" hint))
                  (should-not (string-match-p "C-c C-q" hint)))
                ;; The key an answer was meant as lands in the buffer it was typed in.
                (should-not (parley-test--type elsewhere "a"))
                (should (equal (with-current-buffer elsewhere (buffer-string)) "a"))
                (should (buffer-local-value 'parley--questions chat))
                ;; With `parley-global-mode', the hint names its key, and the key works.
                (parley-global-mode 1)
                (set-window-buffer (selected-window) elsewhere)
                (should (equal (parley--goto-question-key) "C-x M-p q"))
                (should-not (parley-test--type elsewhere "C-x M-p q"))
                (should (eq (window-buffer (selected-window)) chat))
                (should (eq (parley--question-at (window-point)) (car parley--questions)))
                ;; In the chat buffer itself, its own key.
                (should (equal (parley--goto-question-key) "C-c C-q"))
                ;; The prefix is the user's to set.
                (customize-set-variable 'parley-global-prefix "C-c ~")
                (set-window-buffer (selected-window) elsewhere)
                (should (equal (parley--goto-question-key) "C-c ~ q"))
                (customize-set-variable 'parley-global-prefix "C-x M-p")
                (parley--cancel-questions)))))
      (when (fboundp 'parley-global-mode) (parley-global-mode (if was-on 1 -1)))
      (kill-buffer elsewhere))))

;;;; The header line: `%' shown as it is

(ert-deftest parley-daily-header-line-shows-percent-literally ()
  (parley-test--with-chat
    (parley-test--update (parley-test--usage-update 2900 100 100 20 0.0021 128000))
    (parley-test--update "{\"sessionUpdate\":\"session_info_update\",\
\"title\":\"Why is the build at 100%-CPU\"}")
    ;; A mode line construct reads `%': each is doubled, so it shows.
    (let ((line (parley--header-line)))
      (should (string-match-p "context 2\\.9k/128k (2%%)" line))
      (should (string-match-p "Why is the build at 100%%-CPU\\'" line))
      (should (eq (get-text-property (1- (length line)) 'face line) 'italic))
      (should-not (string-match-p "%" (replace-regexp-in-string "%%" "" line))))
    (should (string-match-p "context 2.9k/128k (2%)" (parley--header-text)))))

(ert-deftest parley-daily-mode-line-literal-property ()
  ;; Any text, `%' anywhere (runs of them, at either end, with
  ;; properties): shown as it is, its properties kept.
  (let ((alphabet "%%%-a b\nz1é")
        (state (cl-make-random-state 26)))
    (dotimes (_ 300)
      (let* ((text (apply #'string (cl-loop repeat (cl-random 12 state)
                                            collect (aref alphabet (cl-random (length alphabet)
                                                                              state)))))
             (text (propertize text 'face 'italic))
             (shown (parley--mode-line-literal text)))
        (should (equal (string-replace "%%" "%" shown) text))
        (should-not (string-match-p "%" (string-replace "%%" "" shown)))
        (should (or (string-empty-p shown)
                    (cl-every (lambda (i) (eq (get-text-property i 'face shown) 'italic))
                              (number-sequence 0 (1- (length shown))))))))))

;;;; Keys gptel users type

(ert-deftest parley-daily-c-c-c-m-sends-not-the-model-picker ()
  (should (eq (lookup-key parley-chat-mode-map (kbd "C-c C-m")) #'parley-send))
  (should (eq (lookup-key parley-chat-mode-map (kbd "C-c C-l")) #'parley-set-model))
  (parley-test--with-chat
    (let (sent)
      (cl-letf (((symbol-function 'parley--prompt) (lambda (blocks) (setq sent blocks)))
                ((symbol-function 'parley-set-model) (lambda () (interactive) (error "Picker"))))
        (should-not (parley-test--type (current-buffer) "h i C-c C-m" (point-max)))
        (should (equal sent '((:type "text" :text "hi"))))))))

;;;; The prompt queue

(ert-deftest parley-daily-prompt-typed-during-a-turn-is-queued-and-sent-after ()
  (parley-test--with-chat
    (let ((chat (current-buffer)) (sent nil))
      (cl-letf (((symbol-function 'parley--prompt)
                 (lambda (blocks) (push blocks sent) (setq parley--busy t))))
        (should-not (parley-test--type chat "f i r s t RET" (point-max)))
        (should (= (length sent) 1))
        ;; Typed while the turn runs: queued, not refused, not sent.
        (should-not (parley-test--type chat "s e c o n d C-c C-c" (point-max)))
        (should (= (length sent) 1))
        (should (equal (parley--current-input) "second"))
        (should parley--queued)
        (should (string-match-p "queued" (overlay-get parley--queued 'before-string)))
        ;; Issue 42: the label names the key, not its escape.
        (let ((label (overlay-get parley--queued 'before-string)))
          (should (string-search "C-c C-k or an edit unqueues it" label))
          (should-not (string-search "parley-cancel" label)))
        (should (eq (overlay-get parley--queued 'face) 'parley-queued))
        ;; The turn ends: the queued prompt goes, as if sent then.
        (parley--turn-done '(:stopReason "end_turn"))
        (should (equal (car sent) '((:type "text" :text "second"))))
        (should (equal (parley--current-input) ""))
        (should-not parley--queued)
        (should (string-match-p "You\nsecond\n\\'" (parley-test--transcript)))
        ;; C-c C-k unqueues (the turn goes on); the prompt stays, unsent.
        (should-not (parley-test--type chat "t h i r d RET" (point-max)))
        (should parley--queued)
        (should-not (parley-test--type chat "C-c C-k"))
        (should-not parley--queued)
        (should parley--busy)
        (parley--turn-done '(:stopReason "end_turn"))
        (should (= (length sent) 2))
        (should (equal (parley--current-input) "third"))
        ;; An edit of the queued prompt unqueues it too.
        (setq parley--busy t)
        (should-not (parley-test--type chat "RET" (point-max)))
        (should parley--queued)
        (should-not (parley-test--type chat "!" (point-max)))
        (should-not parley--queued)
        (parley--turn-done '(:stopReason "end_turn"))
        (should (= (length sent) 2))
        ;; A turn that failed does not send it.
        (setq parley--busy t)
        (should-not (parley-test--type chat "RET" (point-max)))
        (parley--turn-failed '(:code -32001 :message "boom"))
        (should (= (length sent) 2))
        (should-not parley--queued)
        (should (equal (parley--current-input) "third!"))))))

;;;; The buffer: its name, and never modified

(ert-deftest parley-daily-buffer-never-shown-modified ()
  (parley-test--with-chat
    (should-not (buffer-modified-p))
    (parley-test--chunk "An answer")
    (should-not (buffer-modified-p))
    (should-not (parley-test--type (current-buffer) "a b c" (point-max)))
    (should (equal (parley--current-input) "abc"))
    (should-not (buffer-modified-p))
    ;; Undo in the prompt still works.
    (should-not (parley-test--type (current-buffer) "C-_" (point-max)))
    (should-not (equal (parley--current-input) "abc"))))

(ert-deftest parley-daily-sessions-of-a-project-get-readable-names ()
  (let ((second nil))
    (unwind-protect
        (parley-test--with-chat
          (should (equal (buffer-name) "*parley: tmp*"))
          (setq second (parley--make-buffer temporary-file-directory "sess-two"))
          (should (equal (buffer-name second) "*parley: tmp: session 2*"))
          (parley-test--update "{\"sessionUpdate\":\"session_info_update\",\
\"title\":\"Why is the build at 100%-CPU\"}")
          (should (equal (buffer-name) "*parley: tmp: Why is the build at 100%-CPU*"))
          ;; A name the user gave stays.
          (rename-buffer "my chat")
          (parley--set-title "Another title")
          (should (equal (buffer-name) "my chat"))
          (should-not (string-match-p "<[0-9]+>" (buffer-name second))))
      (when (buffer-live-p second) (kill-buffer second)))))

(ert-deftest parley-daily-buffer-name-of-any-title-property ()
  ;; Titles are the server's (the model's words): any text, `%',
  ;; newlines, tabs, multibyte, long, blank.  The name is one line,
  ;; bounded, the project's first.
  (let ((alphabet "ab %\n\t é漢*<2>")
        (state (cl-make-random-state 7)))
    (dotimes (_ 300)
      (let* ((title (apply #'string (cl-loop repeat (cl-random 80 state)
                                             collect (aref alphabet (cl-random (length alphabet)
                                                                               state)))))
             (name (parley--buffer-name "/work/proj" title)))
        (should (string-prefix-p "*parley: proj" name))
        (should (string-suffix-p "*" name))
        (should-not (string-match-p "[\n\t]" name))
        (should (<= (string-width name) (+ (length "*parley: proj: *") parley--title-width)))
        (if (string-empty-p (string-trim title))
            (should (equal name "*parley: proj*"))
          (should (string-prefix-p "*parley: proj: " name)))))))

;;;; A replayed edit's diff

(ert-deftest parley-daily-replayed-edit-gets-its-diff-numbered-by-its-location ()
  (parley-test--with-chat
    ;; As `session/load' replays an edit: its arguments, where it
    ;; changed the file (line 7), its result's text; no diff.
    (parley-test--update "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"e1\",\
\"title\":\"Edit app.py\",\"kind\":\"edit\",\"status\":\"completed\",\
\"rawInput\":{\"path\":\"app.py\",\"old_text\":\"a\\nb\\nold\\nc\",\
\"new_text\":\"a\\nb\\nnew\\nc\"},\"locations\":[{\"path\":\"/tmp/app.py\",\"line\":7}],\
\"content\":[{\"type\":\"content\",\"content\":{\"type\":\"text\",\
\"text\":\"Edited app.py (+1 -1 lines).\"}}]}")
    (should (string-match-p "^▸ Edited app\\.py \\+1 −1$" (parley-test--visible-transcript)))
    (goto-char (parley-test--pos "Edited"))
    (let ((diff (with-current-buffer (parley-show-diff) (buffer-string))))
      ;; The changed line is line 7 of the file: the fragment starts at 5.
      (should (equal diff "--- app.py\n+++ app.py\n@@ -5,4 +5,4 @@\n a\n b\n-old\n+new\n c\n")))))

(provide 'parley-daily-test)
;;; parley-daily-test.el ends here
