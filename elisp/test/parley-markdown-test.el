;;; parley-markdown-test.el --- Tests of Markdown as it streams, code blocks, export  -*- lexical-binding: t; -*-

;;; Commentary:

;; The chat buffer fed with synthetic chunks, as in parley-test.el:
;; Markdown fontified line by line while the answer streams (no
;; markdown-mode), links as buttons, code blocks in their language's
;; faces, the code block commands, export, the prompt as a field, and
;; retry against a fake connection.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)
(require 'parley-test)

(defun parley-markdown-test--faces (pos)
  "Return the faces at POS as a list."
  (let ((face (get-text-property pos 'face)))
    (if (listp face) face (list face))))

(ert-deftest parley-markdown-streams-without-markdown-mode ()
  (should-not (featurep 'markdown-mode))
  (parley-test--with-chat
    (setq parley--busy t)
    (parley-test--chunk "# A tit")
    ;; An incomplete line waits for its newline.
    (should-not (get-text-property (parley-test--pos "A tit") 'face))
    (parley-test--chunk "le\nSome `co")
    (should (memq 'parley-markdown-heading (parley-markdown-test--faces (parley-test--pos "A title"))))
    (should-not (get-text-property (parley-test--pos "`co") 'face))
    (parley-test--chunk "de` and **bold** and *em* words.\n- item one\n")
    (should parley--busy)                ; still streaming
    (should (eq (get-text-property (1+ (parley-test--pos "`code`")) 'face) 'parley-markdown-code))
    (should (memq 'parley-markdown-strong (parley-markdown-test--faces (parley-test--pos "bold"))))
    (should (memq 'parley-markdown-emphasis (parley-markdown-test--faces (parley-test--pos "em*"))))
    (should-not (get-text-property (parley-test--pos "words") 'face))
    (should (eq (get-text-property (parley-test--pos "- item") 'face) 'parley-markdown-markup))
    ;; The text stays read-only transcript text.
    (should (get-text-property (parley-test--pos "bold") 'read-only))
    (should (string-match-p "Some `code` and \\*\\*bold\\*\\*" (parley-test--transcript)))))

(ert-deftest parley-markdown-links-are-buttons ()
  (let* ((dir (make-temp-file "parley-md-" t))
         (default-directory (file-name-as-directory dir))
         followed)
    (unwind-protect
        (progn
          (with-temp-file (expand-file-name "notes.txt" dir) (insert "notes\n"))
          (parley-test--with-chat
            (setq default-directory (file-name-as-directory dir))
            (parley-test--chunk "See [the docs](https://example.com/docs) or <https://x.org/a>,\n")
            (parley-test--chunk "and [notes](notes.txt).\n")
            (let ((pos (parley-test--pos "the docs")))
              (should (button-at pos))
              (should (eq (get-text-property pos 'face) 'parley-markdown-link))
              ;; RET follows it, as a click does.
              (should (eq (save-excursion (goto-char pos) (key-binding (kbd "RET")))
                          'push-button))
              (cl-letf (((symbol-function 'browse-url)
                         (lambda (url &rest _) (setq followed url))))
                (push-button pos)
                (should (equal followed "https://example.com/docs"))
                (push-button (parley-test--pos "https://x.org/a"))
                (should (equal followed "https://x.org/a"))))
            ;; A file link opens the file.
            (save-window-excursion
              (push-button (parley-test--pos "notes]"))
              (should (equal (buffer-file-name (window-buffer (selected-window)))
                             (expand-file-name "notes.txt" dir)))
              (kill-buffer (window-buffer (selected-window))))))
      (delete-directory dir t))))

(ert-deftest parley-markdown-code-block-fontified-once-closed ()
  (parley-test--with-chat
    (setq parley--busy t)
    (parley-test--chunk "Here:\n```python\ndef f():\n    return 'x'\n")
    ;; Open: not fontified yet.
    (should-not (get-text-property (parley-test--pos "def") 'face))
    (parley-test--chunk "```\nAfter `it`.\n")
    (should (eq (get-text-property (parley-test--pos "def") 'face) 'font-lock-keyword-face))
    (should (eq (get-text-property (parley-test--pos "'x'") 'face) 'font-lock-string-face))
    (should (eq (get-text-property (parley-test--pos "```python") 'face) 'parley-markdown-markup))
    ;; Inline Markdown is not looked for inside a code block.
    (should (eq (get-text-property (1+ (parley-test--pos "`it`")) 'face) 'parley-markdown-code))
    ;; Another Python block: the mode's buffer, reused, fontifies it afresh.
    (parley-test--chunk "```py\nimport os\nx = \"s\"\n```\n")
    (should (eq (get-text-property (parley-test--pos "import") 'face) 'font-lock-keyword-face))
    (should (eq (get-text-property (parley-test--pos "\"s\"") 'face) 'font-lock-string-face))
    (should-not (get-text-property (parley-test--pos " = \"s") 'face))
    (parley-test--chunk "```sh\necho hi\n```\nand an open one:\n```elisp\n(setq a 1)")
    (parley--turn-done '(:stopReason "end_turn"))
    ;; The end of the answer closes it.
    (should (eq (get-text-property (1+ (parley-test--pos "(setq")) 'face)
                'font-lock-keyword-face))
    ;; Copy: the block at point, else the last one.
    (goto-char (parley-test--pos "return"))
    (should (equal (parley-copy-code-block) "def f():\n    return 'x'"))
    (should (equal (car kill-ring) "def f():\n    return 'x'"))
    (goto-char (point-max))
    (should (equal (parley-copy-code-block) "(setq a 1)"))
    ;; Insert: into another window's buffer, at its point.
    (let ((target (generate-new-buffer "parley-insert-target"))
          (chat (current-buffer)))
      (unwind-protect
          (save-window-excursion
            (set-window-buffer (selected-window) target)
            (with-current-buffer chat
              (goto-char (parley-test--pos "echo"))
              (parley-insert-code-block (selected-window)))
            (should (equal (with-current-buffer target (buffer-string)) "echo hi")))
        (kill-buffer target)))))

(ert-deftest parley-markdown-cost-per-line-is-flat ()
  ;; Each line is fontified once, when its newline arrives; a chunk
  ;; without a newline fontifies nothing.
  (parley-test--with-chat
    (let ((lines 0) (passes 0))
      (cl-letf* ((line (symbol-function 'parley-markdown--line))
                 (pass (symbol-function 'parley-markdown--lines))
                 ((symbol-function 'parley-markdown--line)
                  (lambda (&rest args) (cl-incf lines) (apply line args)))
                 ((symbol-function 'parley-markdown--lines)
                  (lambda (&rest args) (cl-incf passes) (apply pass args))))
        (dotimes (i 300)
          (parley-test--chunk (format "Line %d with **bo" i))
          (parley-test--chunk "ld** and ")
          (parley-test--chunk "`code`\n"))
        (should (= lines 300))
        (should (= passes 300))
        (should (memq 'parley-markdown-strong
                      (parley-markdown-test--faces (parley-test--pos "bold** and `code`\nLine 299"))))))))

(ert-deftest parley-markdown-prompt-is-a-field ()
  (parley-test--with-chat
    (goto-char (point-max))
    (insert "draft prompt")
    (move-beginning-of-line 1)
    ;; C-a stops after "> ", and C-k kills the input: nothing read-only.
    (should (= (point) parley--input))
    (kill-line)
    (should (equal (parley--current-input) ""))
    (should (equal (car kill-ring) "draft prompt"))))

(ert-deftest parley-markdown-export-and-retry ()
  (parley-test--with-fake-server
      `((session/prompt
         . ,(lambda (_params)
              (parley-test--chunk "Weighing it." "t1" "agent_thought_chunk")
              (parley-test--update "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"c1\",\"title\":\"Run Python\",\"kind\":\"execute\",\"status\":\"completed\",\"rawInput\":{\"code\":\"print(1)\"}}")
              (parley-test--chunk "## Answer\n```python\nprint(1)\n```\n" "m1")
              (parley-test--notice "Stopped." "info")
              (parley-test--json
               "{\"stopReason\":\"cancelled\",\"_meta\":{\"parley\":{\"session\":{\"inputTokens\":1,\"outputTokens\":1,\"turns\":1}}}}")))
      (_parley/session/export
       . ,(lambda (params)
            (list :text (format "# A talk\n\nSession %s, %s.\n"
                                (plist-get params :sessionId) (plist-get params :format))))))
    (parley-test--with-chat
      (setq parley--conn 'fake-connection
            parley--title "A talk")
      (goto-char (point-max))
      (insert "Show code")
      (parley-send)
      ;; The server's Markdown, the one format of every client.
      (let* ((file (make-temp-file "parley-export-" nil ".md"))
             (text (progn (parley-export file)
                          (with-temp-buffer (insert-file-contents file) (buffer-string)))))
        (delete-file file)
        (should (equal text "# A talk\n\nSession sess-unit, markdown.\n")))
      ;; A relative name goes to `parley-export-directory', not the workspace.
      (let* ((parley-export-directory (make-temp-file "parley-exports-" t))
             (default-directory temporary-file-directory)
             (file (parley-export "talk.md")))
        (should (equal file (expand-file-name "talk.md" parley-export-directory)))
        (should (file-exists-p file))
        (delete-directory parley-export-directory t))
      (with-current-buffer (parley-export nil)
        (should (string-match-p "\\`# A talk" (buffer-string))))
      ;; Asked where, the user starts in `parley-export-directory'.
      (let ((parley-export-directory "~/exports/") offered)
        (cl-letf (((symbol-function 'read-file-name)
                   (lambda (_prompt directory &rest _) (setq offered directory) (signal 'quit nil))))
          (condition-case nil (call-interactively #'parley-export) (quit nil)))
        (should (equal offered (expand-file-name "~/exports/"))))
      (setq requests (cl-remove '_parley/session/export requests :key #'car))
      ;; Retry sends the same prompt again, in place of the cancelled
      ;; turn: shown once, with the new answer.
      (parley-retry)
      (should (equal (mapcar #'car requests) '(session/prompt session/prompt)))
      (should (equal (plist-get (cdar requests) :prompt)
                     (plist-get (cdadr requests) :prompt)))
      (should (equal (plist-get (cdar requests) :_meta) '(:parley (:retry t))))
      (should (string-match-p "\\`You\nShow code\n\nParley\n▸ Thinking\nWeighing it\\.\n▸ Run Python \\[done\\]\n\\(.\\|\n\\)*## Answer\\(.\\|\n\\)*Stopped\\.\n\\'"
                              (parley-test--transcript)))
      (should (= (how-many "^You$" (point-min) (point-max)) 1)))))

(ert-deftest parley-markdown-provider-error-offers-retry ()
  (parley-test--with-chat
    (setq parley--busy t
          parley--last-prompt '((:type "text" :text "hi")))
    (parley--turn-failed '(:code -32001 :message "The provider is overloaded."))
    (should (string-match-p "Error: The provider is overloaded\\.\nRetry: C-c C-r sends the prompt again, in place of this turn\\.\n\\'"
                            (parley-test--transcript)))
    (setq parley--busy t)
    (parley--turn-failed '(:code -32603 :message "Internal error."))
    (should (string-match-p "Error: Internal error\\.\n\\'" (parley-test--transcript)))))

(ert-deftest parley-markdown-replayed-turn-marks ()
  ;; session/load replays an answer cut short by an error with its mark,
  ;; and a turn that stopped with its notice, after the turn's updates.
  (parley-test--with-chat
    (parley-test--chunk "Partial" nil "user_message_chunk")
    (parley-test--update
     "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"half an ans\"},\"messageId\":\"m1\",\"_meta\":{\"parley\":{\"stopReason\":\"cancelled\"}}}")
    (parley-test--notice "Stopped." "info")
    (parley-test--chunk "Broken" nil "user_message_chunk")
    (parley-test--update
     "{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"cut\"},\"messageId\":\"m2\",\"_meta\":{\"parley\":{\"stopReason\":\"failed\"}}}")
    (should (equal (parley-test--transcript)
                   "You\nPartial\n\nParley\nhalf an ans\nStopped.\n\nYou\nBroken\n\nParley\ncut\nError: the turn failed here\n"))))

(provide 'parley-markdown-test)
;;; parley-markdown-test.el ends here
