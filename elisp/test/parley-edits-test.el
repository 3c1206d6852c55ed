;;; parley-edits-test.el --- Unit tests for edits: files, diffs, undo  -*- lexical-binding: t; -*-

;;; Commentary:

;; The client's side of edits, without a server: `fs/read_text_file'
;; and `fs/write_text_file' asked over the `cat' loopback (each
;; request comes back as the server's), the diffs in permission
;; questions and in the transcript, and undoing a turn.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)
(require 'parley-test)

(defmacro parley-edits-test--with-workspace (&rest body)
  "Run BODY in a chat buffer whose session's workspace is a new directory.
`ws' is bound to the workspace (no trailing slash) during BODY; the
directory and the buffers visiting its files go afterwards."
  (declare (indent 0) (debug t))
  `(let* ((ws (directory-file-name (make-temp-file "parley-ws-" t)))
          (buffer (parley--make-buffer ws parley-test--session)))
     (unwind-protect
         (with-current-buffer buffer ,@body)
       (kill-buffer buffer)
       (dolist (b (buffer-list))
         (when (and (buffer-file-name b)
                    (string-prefix-p (file-truename ws) (file-truename (buffer-file-name b))))
           (with-current-buffer b (set-buffer-modified-p nil))
           (kill-buffer b)))
       (delete-directory ws t))))

(defun parley-edits-test--file (ws name &optional content)
  "Return the file NAME in WS; with CONTENT, write it there first."
  (let ((file (expand-file-name name ws)))
    (when content
      (make-directory (file-name-directory file) t)
      (let ((coding-system-for-write 'utf-8-unix))
        (write-region content nil file nil 'silent)))
    file))

(defun parley-edits-test--disk (file)
  "Return the bytes of FILE as a unibyte string."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file)
    (buffer-string)))

(defun parley-edits-test--ask (conn method params)
  "Send the server's request METHOD with PARAMS over the loopback CONN.
Return its result, or (error CODE MESSAGE)."
  (condition-case err
      (jsonrpc-request conn method (append (list :sessionId parley-test--session) params)
                       :timeout 10)
    (jsonrpc-error (list 'error (alist-get 'jsonrpc-error-code (cdr err))
                         (alist-get 'jsonrpc-error-message (cdr err))))))

;;;; fs/read_text_file and fs/write_text_file

(ert-deftest parley-edits-client-advertises-files ()
  (let ((fs (plist-get (plist-get (parley--initialize-params) :clientCapabilities) :fs)))
    (should (eq (plist-get fs :readTextFile) t))
    (should (eq (plist-get fs :writeTextFile) t))))

(ert-deftest parley-edits-read-gives-buffer-text-or-disk ()
  (parley-edits-test--with-workspace
    (parley-test--with-loopback
      (let ((file (parley-edits-test--file ws "src/app.py" "one\ntwo\nthree\n")))
        ;; No buffer: the disk.
        (should (equal (parley-edits-test--ask conn 'fs/read_text_file (list :path file))
                       '(:content "one\ntwo\nthree\n")))
        ;; A buffer with unsaved text: that text.
        (with-current-buffer (find-file-noselect file)
          (goto-char (point-max))
          (insert "unsaved\n")
          (should (buffer-modified-p)))
        (should (equal (parley-edits-test--ask conn 'fs/read_text_file (list :path file))
                       '(:content "one\ntwo\nthree\nunsaved\n")))
        ;; line and limit: lines 2 and 3.
        (should (equal (parley-edits-test--ask conn 'fs/read_text_file
                                               (list :path file :line 2 :limit 2))
                       '(:content "two\nthree\n")))
        ;; Missing: -32002.
        (should (equal (car (cdr (parley-edits-test--ask
                                  conn 'fs/read_text_file
                                  (list :path (expand-file-name "nope.py" ws)))))
                       -32002))
        ;; An unknown session: -32002 too.
        (should (equal (nth 1 (condition-case err
                                  (jsonrpc-request conn 'fs/read_text_file
                                                   (list :sessionId "other" :path file)
                                                   :timeout 10)
                                (jsonrpc-error (list 'error (alist-get 'jsonrpc-error-code
                                                                       (cdr err))))))
                       -32002))))))

(ert-deftest parley-edits-files-outside-workspace-refused ()
  (parley-edits-test--with-workspace
    (parley-test--with-loopback
      (let* ((outside (make-temp-file "parley-outside-" nil ".txt" "secret\n"))
             (link (expand-file-name "link.txt" ws)))
        (unwind-protect
            (progn
              (make-symbolic-link outside link)
              (dolist (path (list outside link "../x.txt"
                                  (concat ws "/../" (file-name-nondirectory outside))))
                (let ((answer (parley-edits-test--ask conn 'fs/read_text_file
                                                      (list :path path))))
                  (should (eq (car answer) 'error))
                  (should (string-match-p "outside the session's workspace" (nth 2 answer))))
                (let ((answer (parley-edits-test--ask conn 'fs/write_text_file
                                                      (list :path path :content "pwned\n"))))
                  (should (eq (car answer) 'error))))
              (should (equal (parley-edits-test--disk outside) "secret\n"))
              (should-not (file-exists-p (expand-file-name "x.txt" (file-name-directory ws)))))
          (delete-file outside))))))

(ert-deftest parley-edits-write-into-visiting-buffer ()
  (parley-edits-test--with-workspace
    (parley-test--with-loopback
      (let* ((old "def f():\n    return 1\n\n\ndef g():\n    return 2\n")
             (new "def f():\n    return 10\n\n\ndef g():\n    return 2\n")
             (file (parley-edits-test--file ws "app.py" old))
             (visiting (find-file-noselect file)))
        (with-current-buffer visiting
          (buffer-enable-undo)
          ;; Point in g, which the edit does not touch.
          (goto-char (point-min))
          (search-forward "return 2")
          (setq buffer-undo-list nil))
        (let ((point-before (with-current-buffer visiting (point))))
          (should (equal (parley-edits-test--ask conn 'fs/write_text_file
                                                 (list :path file :content new))
                         nil))
          (with-current-buffer visiting
            (should (equal (buffer-string) new))
            ;; Point is still after "return 2": one character more before it.
            (should (= (point) (1+ point-before)))
            (should (looking-back "return 2" (line-beginning-position)))
            ;; Saved: the disk has it, and the buffer is unmodified.
            (should-not (buffer-modified-p))
            (should (equal (parley-edits-test--disk file) new))
            ;; One undo brings the old text back.
            (undo-boundary)
            (let ((last-command nil)) (undo))
            (should (equal (buffer-string) old))))))))

(ert-deftest parley-edits-write-without-buffer-creates-file ()
  (parley-edits-test--with-workspace
    (parley-test--with-loopback
      (let ((file (expand-file-name "new/dir/notes.txt" ws)))
        (should (equal (parley-edits-test--ask conn 'fs/write_text_file
                                               (list :path file :content "héllo\r\nworld"))
                       nil))
        ;; Exactly the content: UTF-8, CRLF kept, no final newline added.
        (should (equal (parley-edits-test--disk file)
                       (encode-coding-string "héllo\r\nworld" 'utf-8)))
        (should-not (get-file-buffer file))
        ;; Relative paths are taken from the workspace.  The reply is {}.
        (let ((sent nil))
          (cl-letf* ((send (symbol-function 'process-send-string))
                     ((symbol-function 'process-send-string)
                      (lambda (process string) (push string sent) (funcall send process string))))
            (parley-edits-test--ask conn 'fs/write_text_file (list :path "rel.txt" :content "r\n")))
          (should (cl-some (lambda (s) (string-match-p "\"result\":{}" s)) sent)))
        (should (equal (parley-edits-test--disk (expand-file-name "rel.txt" ws)) "r\n"))))))

(ert-deftest parley-edits-write-through-a-link-refused ()
  ;; The server sends the place it resolved; a folder swapped for a link
  ;; since (conf -> .git) would lead the write into .git/config.
  (parley-edits-test--with-workspace
    (parley-test--with-loopback
      (make-directory (expand-file-name ".git" ws))
      (parley-edits-test--file ws ".git/config" "[core]\n")
      (make-symbolic-link ".git" (expand-file-name "conf" ws))
      (let* ((file (expand-file-name "conf/config" ws))
             (answer (parley-edits-test--ask conn 'fs/write_text_file
                                             (list :path file :content "fsmonitor\n"))))
        (should (eq (car-safe answer) 'error))
        (should (string-match-p "through a symbolic link: not written" (nth 2 answer)))
        (should (equal (parley-edits-test--disk (expand-file-name ".git/config" ws)) "[core]\n"))
        ;; A file of its own true name is written as before.
        (should (equal (parley-edits-test--ask conn 'fs/write_text_file
                                               (list :path (expand-file-name "own.txt" ws)
                                                     :content "ok\n"))
                       nil))))))

(ert-deftest parley-edits-write-keeps-crlf-of-dos-buffer ()
  (parley-edits-test--with-workspace
    (parley-test--with-loopback
      (let* ((file (parley-edits-test--file ws "win.txt" "one\r\ntwo\r\n"))
             (visiting (find-file-noselect file)))
        (should (eq (coding-system-eol-type (buffer-local-value 'buffer-file-coding-system
                                                                 visiting))
                    1))
        (parley-edits-test--ask conn 'fs/write_text_file
                                (list :path file :content "one\r\nTWO\r\n"))
        ;; The buffer holds lines without CR; the disk keeps CRLF, not CRCRLF.
        (should (equal (with-current-buffer visiting (buffer-string)) "one\nTWO\n"))
        (should (equal (parley-edits-test--disk file) "one\r\nTWO\r\n"))))))

;;;; Diffs
;;;; Diffs

(ert-deftest parley-edits-diff-hunks-like-diff-u ()
  ;; Two changes far apart are two hunks, numbered as diff -u does.
  (let ((old "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n")
        (new "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nM\nn\nz\n"))
    (should (equal (substring-no-properties (parley-diff-string "f.txt" old new))
                   (concat "--- f.txt\n+++ f.txt\n"
                           "@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n"
                           "@@ -10,5 +10,6 @@\n j\n k\n l\n-m\n+M\n n\n+z\n")))
    (should (equal (parley-diff-stats old new) '(3 . 2))))
  ;; A line moved is one removal and one addition, not a rewrite.
  (should (equal (parley-diff-stats "1\n2\n3\n4\n" "2\n3\n4\n1\n") '(1 . 1)))
  ;; A deleted file, and a change too large to search: all out, all in.
  (should (equal (substring-no-properties (parley-diff-string "gone" "x\ny\n" ""))
                 "--- gone\n+++ gone\n@@ -1,2 +0,0 @@\n-x\n-y\n"))
  (let ((old (mapconcat #'number-to-string (number-sequence 1 3000) "\n"))
        (new (mapconcat (lambda (n) (format "x%d" n)) (number-sequence 1 3000) "\n")))
    (should (equal (parley-diff-stats old new) '(3000 . 3000)))))

(defconst parley-edits-test--edit-request
  (list :sessionId "sess-unit"
        :toolCall (list :toolCallId "e1" :title "Edit app.py" :kind "edit"
                        :rawInput '(:path "app.py" :old_text "x = 1" :new_text "x = 10")
                        :content (vector '(:type "diff" :path "WS/app.py"
                                                 :oldText "x = 1\ny = 2\n"
                                                 :newText "x = 10\ny = 2\n")))
        :options (vector '(:optionId "ok" :name "Allow" :kind "allow_once")
                         '(:optionId "no" :name "Reject" :kind "reject_once")))
  "A permission request for an edit; WS stands for the workspace.")

(defun parley-edits-test--edit-request (ws)
  "Return `parley-edits-test--edit-request' with its path in WS."
  (let ((request (copy-tree parley-edits-test--edit-request t)))
    (plist-put (aref (plist-get (plist-get request :toolCall) :content) 0)
               :path (expand-file-name "app.py" ws))
    request))

(ert-deftest parley-edits-question-diff-and-d-key ()
  (parley-edits-test--with-workspace
    (parley-test--with-loopback
      (let ((answer (parley-test--request conn 'session/request_permission
                                          (parley-edits-test--edit-request ws))))
        (parley-test--wait (lambda () parley--questions))
        ;; The diff, its path relative to the workspace, in diff-mode's
        ;; faces; not the input besides (issue 42: shown once).
        (should (string-match-p
                 (concat "Parley asks permission: Edit app.py (edit)\n"
                         "    --- app.py\n    \\+\\+\\+ app.py\n    @@ -1,2 \\+1,2 @@\n"
                         "    -x = 1\n    \\+x = 10\n     y = 2\n"
                         "  \\[y\\] Allow   \\[n\\] Reject   \\[d\\] Diff in a buffer\n")
                 (parley-test--transcript)))
        (should (eq (get-text-property (parley-test--pos "-x = 1") 'face) 'diff-removed))
        (should (eq (get-text-property (parley-test--pos "+x = 10") 'face) 'diff-added))
        (should (eq (get-text-property (parley-test--pos "@@ -1,2") 'face) 'diff-hunk-header))
        ;; d opens it in a diff-mode buffer, and answers nothing.
        (let ((chat (current-buffer)))
          (should-not (parley-test--type chat "d" (parley-test--question-pos)))
          (let ((diff (get-buffer "*parley diff: Edit app.py*")))
            (should diff)
            (with-current-buffer diff
              (should (derived-mode-p 'diff-mode))
              (should buffer-read-only)
              (should (equal default-directory (file-name-as-directory ws)))
              (should (equal (buffer-string)
                             "--- app.py\n+++ app.py\n@@ -1,2 +1,2 @@\n-x = 1\n+x = 10\n y = 2\n"))
              (font-lock-ensure)
              (goto-char (point-min))
              (search-forward "+x = 10")
              (should (memq 'diff-added (ensure-list (get-text-property (1- (point)) 'face)))))
            (kill-buffer diff))
          (parley-test--settle)
          (should (eq (car answer) 'pending))
          (should-not (parley-test--type chat "y" (parley-test--question-pos)))
          (parley-test--wait (lambda () (not (eq (car answer) 'pending))))
          (should (equal (car answer) '(:outcome (:outcome "selected" :optionId "ok")))))))))

;;;; Edits in the transcript

(defun parley-edits-test--edit-update (ws status &optional old new extra)
  "Return a tool_call_update JSON of the edit of app.py in WS, with STATUS.
OLD and NEW are the diff's texts; EXTRA more JSON fields."
  (json-serialize
   (append (list :sessionUpdate "tool_call_update" :toolCallId "e1" :status status
                 :content (vector (list :type "diff" :path (expand-file-name "app.py" ws)
                                        :oldText (or old "a\nb\nc\n")
                                        :newText (or new "a\nB\nB2\nB3\nc\n"))))
           extra)))

(ert-deftest parley-edits-transcript-one-line-that-expands ()
  (parley-edits-test--with-workspace
    (parley-test--update
     "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"e1\",\"title\":\"Edit app.py\",\"kind\":\"edit\",\"status\":\"pending\"}")
    (should (string-match-p "▸ Edit app.py \\[pending\\]\n\\'" (parley-test--visible-transcript)))
    (parley-test--update (parley-edits-test--edit-update ws "in_progress"))
    (should (string-match-p "▸ Edit app.py \\+3 −1 \\[running\\]\n\\'"
                            (parley-test--visible-transcript)))
    (parley-test--update (parley-edits-test--edit-update ws "completed"))
    ;; One line, the counts in diff-mode's faces; the diff folded in it.
    (should (string-match-p "Parley\n▸ Edited app.py \\+3 −1\n\\'" (parley-test--visible-transcript)))
    (should (eq (get-text-property (parley-test--pos "+3") 'face) 'diff-added))
    (should (eq (get-text-property (parley-test--pos "−1") 'face) 'diff-removed))
    (should (string-match-p "+B2" (parley-test--transcript)))
    ;; TAB expands it to the diff; RET folds it again.
    (goto-char (parley-test--pos "Edited"))
    (parley-tab)
    (should (string-match-p
             (concat "▾ Edited app.py \\+3 −1\n    --- app.py\n    \\+\\+\\+ app.py\n"
                     "    @@ -1,3 \\+1,5 @@\n     a\n    -b\n    \\+B\n    \\+B2\n    \\+B3\n     c\n\\'")
             (parley-test--visible-transcript)))
    (should (eq (get-text-property (parley-test--pos "+B2") 'face) 'diff-added))
    (should (eq (get-text-property (parley-test--pos "-b") 'face) 'diff-removed))
    (goto-char (parley-test--pos "Edited"))
    (parley-return)
    (should (string-match-p "▸ Edited app.py \\+3 −1\n\\'" (parley-test--visible-transcript)))
    ;; C-c C-d on it opens the diff in diff-mode.
    (goto-char (parley-test--pos "Edited"))
    (parley-show-diff)
    (with-current-buffer "*parley diff: Edit app.py*"
      (should (derived-mode-p 'diff-mode))
      (should (string-match-p "^\\+B2$" (buffer-string)))
      (kill-buffer))
    ;; Text after it goes below; the line is still one at the turn's end.
    (parley-test--chunk "Done." "m2")
    (parley--turn-done '(:stopReason "end_turn"))
    (should (string-match-p "▸ Edited app.py \\+3 −1\nDone\\.\n\\'"
                            (parley-test--visible-transcript)))))

(ert-deftest parley-edits-replayed-edit-is-one-line ()
  ;; session/load replays a finished edit as one tool_call.
  (parley-edits-test--with-workspace
    (parley-test--update
     (json-serialize
      (list :sessionUpdate "tool_call" :toolCallId "old1" :title "Edit app.py" :kind "edit"
            :status "completed"
            :content (vector (list :type "diff" :path (expand-file-name "app.py" ws)
                                   :oldText :null :newText "new\nfile\n")))
      :null-object :null))
    (should (string-match-p "▸ Edited app.py \\+2 −0\n\\'" (parley-test--visible-transcript)))
    (should (string-match-p "--- /dev/null" (parley-test--transcript)))))

(ert-deftest parley-edits-transcript-failed-edit-says-why ()
  (parley-edits-test--with-workspace
    (parley-test--update
     (parley-edits-test--edit-update
      ws "failed" "x\n" "y\n"
      (list :title "Edit app.py" :kind "edit"
            :rawOutput (list :content "app.py changed since you read it; read it again."
                             :isError t))))
    (should (string-match-p "▸ Edit app.py \\+1 −1 \\[failed\\]\n\\'"
                            (parley-test--visible-transcript)))
    (goto-char (parley-test--pos "Edit app.py"))
    (parley-tab)
    (should (string-match-p "    -x\n    \\+y\n  output:\n    app.py changed since you read it"
                            (parley-test--visible-transcript)))))

(ert-deftest parley-edits-completed-edit-reverts-unmodified-buffer ()
  (parley-edits-test--with-workspace
    (let* ((file (parley-edits-test--file ws "app.py" "a\nb\nc\n"))
           (visiting (find-file-noselect file)))
      ;; The server wrote the disk itself (an editor without fs/write_text_file).
      (parley-edits-test--file ws "app.py" "a\nB\nB2\nB3\nc\n")
      (set-file-times file (time-add nil 5))
      (parley-test--update (parley-edits-test--edit-update ws "completed"))
      (parley-test--wait (lambda () (equal (with-current-buffer visiting (buffer-string))
                                           "a\nB\nB2\nB3\nc\n")))
      (should-not (buffer-modified-p visiting)))))

;;;; Undoing a turn

(ert-deftest parley-edits-turns-numbered-and-synced ()
  (parley-test--with-chat
    (parley--render-prompt "first" nil)
    (parley-test--chunk "One." "m1")
    (parley--render-prompt "second" nil)
    (parley-test--chunk "Two." "m2")
    (should (= parley--turn-count 2))
    (should (= (parley--turn-at (parley-test--pos "One.")) 1))
    (should (= (parley--turn-at (parley-test--pos "first")) 1))
    (should (= (parley--turn-at (parley-test--pos "Two.")) 2))
    ;; The server's count wins: the last prompt is its turn 7.
    (setq parley--busy t)
    (parley--turn-done '(:stopReason "end_turn" :_meta (:parley (:session (:turns 7)))))
    (should (= parley--turn-count 7))
    (should (= (parley--turn-at (parley-test--pos "Two.")) 7))
    (should (= (parley--turn-at (parley-test--pos "One.")) 1))))

(ert-deftest parley-edits-undo-turn-restores-and-reverts ()
  (parley-edits-test--with-workspace
    (parley-test--with-loopback
      (let* ((restored (parley-edits-test--file ws "a.py" "a = 2\n"))
             (kept (parley-edits-test--file ws "b.py" "b = 2\n"))
             (removed (parley-edits-test--file ws "new/c.py" "c = 1\n"))
             (a-buffer (find-file-noselect restored))
             (b-buffer (find-file-noselect kept))
             (c-buffer (find-file-noselect removed))
             (asked nil)
             (messages nil)
             (parley--connection conn)
             (dispatch (symbol-function 'parley--handle-request)))
        (setq parley--conn conn)
        (with-current-buffer b-buffer (goto-char (point-max)) (insert "# mine\n"))
        (parley--render-prompt "first" nil)
        (parley-test--chunk "One." "m1")
        (parley--render-prompt "second" nil)
        (parley-test--chunk "Two." "m2")
        ;; The "server" restores: the disk goes back, c.py goes.
        (cl-letf (((symbol-function 'parley--handle-request)
                   (lambda (c method params)
                     (if (not (eq method '_parley/session/restore))
                         (funcall dispatch c method params)
                       (push params asked)
                       (if (cdr asked)
                           ;; The second time, the user keeps the files.
                           (list :files [] :rejected t
                                 :text "Nothing was restored: you kept your changes to `a.py`.")
                         (parley-edits-test--file ws "a.py" "a = 1\n")
                         (set-file-times restored (time-add nil 5))
                         (parley-edits-test--file ws "b.py" "b = 1\n")
                         (set-file-times kept (time-add nil 5))
                         (delete-file removed)
                         (list :files (vector (list :path restored :action "restored")
                                              (list :path "b.py" :action "restored")
                                              (list :path "new/c.py" :action "removed"))
                               :failed (vector (list :path "d.py" :reason "permission denied"))
                               :text "Restored the files of turn 2 as they were before it: (the server's words)")))))
                  ((symbol-function 'message)
                   (lambda (format-string &rest args)
                     (push (apply #'format-message format-string args) messages))))
          (parley-undo-turn)
          (parley-test--wait (lambda () (string-match-p "the server's words" (parley-test--transcript))))
          (should (equal (car asked) (list :sessionId parley-test--session :turn 2)))
          ;; The unmodified buffer shows the restored file; the modified one
          ;; is left alone; the removed file's buffer is gone.
          (should (equal (with-current-buffer a-buffer (buffer-string)) "a = 1\n"))
          (should-not (buffer-modified-p a-buffer))
          (should (equal (with-current-buffer b-buffer (buffer-string)) "b = 2\n# mine\n"))
          (should-not (buffer-live-p c-buffer))
          ;; The server's words, as a `/undo' turn (as replayed); the echo
          ;; area adds the buffer Emacs left alone.
          (let ((said "Restored the files of turn 2 as they were before it: (the server's words)"))
            (should (string-match-p (regexp-quote (concat "You\n/undo\n\nParley\n" said "\n"))
                                    (parley-test--transcript)))
            (should (member (concat "Parley: " said "\n(not reverted, unsaved changes: b.py)")
                            messages)))
          ;; With a prefix argument, the turn at point.
          (goto-char (parley-test--pos "One."))
          (parley-undo-turn t)
          (parley-test--wait (lambda () (string-match-p "you kept your changes to `a.py`"
                                                        (parley-test--transcript))))
          (should (equal (plist-get (car asked) :turn) 1)))
        (with-current-buffer b-buffer (set-buffer-modified-p nil))))))

;; The server's words for each restore (tests/server-words-cases.json,
;; which pytest holds the server to and the VS Code tests show too).
(defconst parley-edits-test--words-file
  (expand-file-name "../../tests/server-words-cases.json"
                    (file-name-directory (or load-file-name buffer-file-name)))
  "The server's words every client shows as they come.")

(ert-deftest parley-edits-undo-shows-the-servers-words-of-each-case ()
  (let ((cases (plist-get (with-temp-buffer
                            (insert-file-contents parley-edits-test--words-file)
                            (json-parse-buffer :object-type 'plist :null-object nil
                                               :false-object :json-false))
                          :restore)))
    (should (>= (length cases) 5))
    (seq-doseq (case cases)
      (parley-edits-test--with-workspace
        (let* ((result (plist-get case :result))
               (text (plist-get result :text))
               (turn (plist-get case :turn))
               (messages nil))
          (setq parley--edited-turns (list turn))
          (cl-letf (((symbol-function 'message)
                     (lambda (format-string &rest args)
                       (push (apply #'format-message format-string args) messages))))
            (parley--turn-undone turn result))
          (ert-info ((plist-get case :name))
            (should (string-search text (parley-test--transcript)))
            (should (equal messages (list (concat "Parley: " text))))
            ;; Unless declined or cancelled, the server dropped the turn's
            ;; checkpoints: the next undo goes further back.
            (should (eq (null parley--edited-turns)
                        (not (or (eq (plist-get result :rejected) t)
                                 (eq (plist-get result :cancelled) t)))))))))))

(ert-deftest parley-edits-undo-turn-goes-back-one-editing-turn-at-a-time ()
  (parley-edits-test--with-workspace
    (let ((asked nil))
      (cl-letf (((symbol-function 'parley--undo-turn) (lambda (turn) (push turn asked))))
        ;; Turn 1 edits; the server counts it as its turn 4.
        (parley--render-prompt "edit it" nil)
        (parley-test--update (parley-edits-test--edit-update ws "completed"))
        (setq parley--busy t)
        (parley--turn-done '(:stopReason "end_turn" :_meta (:parley (:session (:turns 4)))))
        ;; Turn 5 only talks.
        (parley--render-prompt "thanks" nil)
        (parley-test--chunk "You are welcome." "m9")
        (should (= parley--turn-count 5))
        (parley-undo-turn)
        (should (equal asked '(4)))
        ;; Once undone, the next undo has no editing turn left: the last turn.
        (parley--turn-undone 4 '(:files [(:path "app.py" :action "restored")]
                                 :text "Restored the files of turn 4 as they were before it:"))
        (should-not parley--edited-turns)
        (parley-undo-turn)
        (should (equal asked '(5 4)))))))

(ert-deftest parley-edits-undo-turn-refused-when-nothing-or-busy ()
  (parley-test--with-chat
    (should-error (parley-undo-turn) :type 'user-error)
    (parley--render-prompt "first" nil)
    (setq parley--busy t)
    (should-error (parley-undo-turn) :type 'user-error)
    (should (eq (lookup-key parley-chat-mode-map (kbd "C-c C-u")) #'parley-undo-turn))))

(provide 'parley-edits-test)
;;; parley-edits-test.el ends here
