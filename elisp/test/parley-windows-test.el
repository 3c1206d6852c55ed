;;; parley-windows-test.el --- Where a diff and a terminal are shown (issue 42)  -*- lexical-binding: t; -*-

;;; Commentary:

;; A frame with the file being edited on the left and the chat on the
;; right, as a user has it: after each step, which window shows what.
;; A diff (`d' in a question, then C-c C-d) and a command's terminal
;; open beside the chat, in one window of Parley's own that they share;
;; a jump to an error goes to the window of its file, or else to
;; Parley's; the file's window and the chat's keep their buffers; `q'
;; deletes Parley's window.  Over the loopback connection (parley-test.el).

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)
(require 'parley-test)

(defun parley-windows-test--edit-question (conn)
  "Ask on CONN about an edit of notes.txt, with its diff; return the answer cell."
  (parley-test--request
   conn 'session/request_permission
   (list :sessionId parley-test--session
         :toolCall (list :toolCallId "e1" :title "Edit notes.txt" :kind "edit"
                         :rawInput (list :path "notes.txt")
                         :content (vector '(:type "diff" :path "notes.txt"
                                                  :oldText "one\n" :newText "two\n")))
         :options (vector '(:optionId "ok" :name "Allow" :kind "allow_once")
                          '(:optionId "no" :name "Reject" :kind "reject_once")))))

(defun parley-windows-test--goto-error (terminal location)
  "Type RET on LOCATION, an error line of the TERMINAL buffer, in its window."
  (with-current-buffer terminal
    (parley-test--wait (lambda () (string-search location (buffer-string))))
    (goto-char (point-min))
    (search-forward location)
    (goto-char (match-beginning 0))
    (set-window-point (selected-window) (point)))
  (execute-kbd-macro (kbd "RET")))

(defun parley-windows-test--shown ()
  "Return the buffers of the frame's windows, in the frame's order."
  (mapcar #'window-buffer (window-list nil 'no-minibuf (frame-first-window))))

(ert-deftest parley-windows-diff-and-terminal-beside-the-chat ()
  (let* ((dir (file-name-as-directory (make-temp-file "parley-windows-" t)))
         (source (progn (with-temp-file (expand-file-name "app.py" dir) (insert "a = 1\nb = 2\n"))
                        (with-temp-file (expand-file-name "other.py" dir) (insert "c = 3\n"))
                        (find-file-noselect (expand-file-name "app.py" dir))))
         (parley-display-terminals t))
    (unwind-protect
        (parley-test--with-chat
          (let ((chat (current-buffer)))
            ;; The file being edited on the left, the chat on the right.
            (delete-other-windows)
            (set-window-buffer (selected-window) source)
            (select-window (split-window-right))
            (set-window-buffer (selected-window) chat)
            (set-buffer chat)
            (should (equal (parley-windows-test--shown) (list source chat)))
            (parley-test--with-loopback
              (parley-windows-test--edit-question conn)
              (parley-test--wait (lambda () (buffer-local-value 'parley--questions chat)))
              ;; `d': the diff in a third window; the file and the chat stay.
              (should-not (parley-test--type chat "d" (parley-test--question-pos)))
              (let* ((diff (get-buffer "*parley diff: Edit notes.txt*"))
                     (own (get-buffer-window diff)))
                (should (equal (parley-windows-test--shown) (list source chat diff)))
                (should (eq (selected-window) (get-buffer-window chat)))
                ;; C-c C-d: the same window, not a fourth.
                (with-current-buffer diff (rename-buffer "*parley diff: the first*"))
                (should-not (parley-test--type chat "C-c C-d" (parley-test--question-pos)))
                (should (equal (parley-windows-test--shown)
                               (list source chat (get-buffer "*parley diff: Edit notes.txt*"))))
                (should (eq (get-buffer-window "*parley diff: Edit notes.txt*") own))
                (kill-buffer "*parley diff: the first*")
                ;; A command's terminal: that window again.
                (let* ((answer (parley-test--request
                                conn 'terminal/create
                                (list :sessionId parley-test--session :command "/bin/sh"
                                      :args ["-c" "echo 'app.py:2: error: one'; \
echo 'other.py:1: error: two'"]
                                      :cwd dir)))
                       (terminal (progn (parley-test--wait
                                         (lambda () (not (eq (car answer) 'pending))))
                                        (parley-terminals-buffer
                                         (plist-get (car answer) :terminalId)))))
                  (should (equal (parley-windows-test--shown) (list source chat terminal)))
                  (should (eq (get-buffer-window terminal) own))
                  ;; RET on an error of the file being edited: its window.
                  (select-window own)
                  (parley-windows-test--goto-error terminal "app.py:2:")
                  (should (equal (parley-windows-test--shown) (list source chat terminal)))
                  (should (eq (selected-window) (get-buffer-window source)))
                  (should (= (with-current-buffer source (line-number-at-pos)) 2))
                  ;; On an error of another file: beside the chat, not over it.
                  (select-window own)
                  (parley-windows-test--goto-error terminal "other.py:1:")
                  (let ((other (get-file-buffer (expand-file-name "other.py" dir))))
                    (should (equal (parley-windows-test--shown) (list source chat other)))
                    (should (eq (get-buffer-window other) own))
                    (kill-buffer other))
                  ;; The terminal shown again (its link in the chat): there.
                  (should (eq (parley-windows-show terminal chat) own))
                  ;; `q' there: Parley's window goes, the frame is as it was.
                  (select-window own)
                  (execute-kbd-macro (kbd "q"))
                  (should (equal (parley-windows-test--shown) (list source chat)))
                  (should-not (window-live-p own))
                  (kill-buffer terminal)))
              (parley--cancel-questions))))
      (kill-buffer source)
      (when (get-buffer "*parley diff: Edit notes.txt*")
        (kill-buffer "*parley diff: Edit notes.txt*"))
      (delete-directory dir t))))

(provide 'parley-windows-test)
;;; parley-windows-test.el ends here
