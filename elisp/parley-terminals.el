;;; parley-terminals.el --- ACP terminals: the server's commands run by Emacs  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; Emacs advertises `clientCapabilities.terminal', so the server runs a
;; command (`run_command') through the ACP methods `terminal/create',
;; `terminal/output', `terminal/wait_for_exit', `terminal/kill' and
;; `terminal/release'.  Each terminal is a process in a buffer
;; `*parley-terminal: COMMAND*' in `parley-terminal-mode', derived from
;; `compilation-mode': ANSI colours are shown, and `file:line:' error
;; lines are links, as in a compilation.
;;
;; The server's copy of the output (`terminal/output') is kept apart
;; from the buffer, as the process wrote it, bounded by the terminal's
;; `outputByteLimit': the oldest output goes first, at a character
;; boundary.  `terminal/wait_for_exit' is answered when the process
;; ends, from its sentinel: Emacs never waits for it.  A released
;; terminal's process is gone, its buffer stays for the user; a tool
;; card links to it (`parley-terminals-link').

;;; Code:

(require 'ansi-color)
(require 'cl-lib)
(require 'comint)
(require 'compile)
(require 'jsonrpc)
(require 'subr-x)
(require 'parley-connection)
(require 'parley-windows)

(defcustom parley-display-terminals t
  "Non-nil means a terminal the server starts is shown as it starts.
It is shown only when its session's chat buffer is in a window,
beside it (`parley-display-beside-chat'), in the window of the last
terminal or diff when there is one."
  :type 'boolean
  :group 'parley)

;;;; Terminals

(cl-defstruct (parley-terminal (:constructor parley-terminal--create) (:copier nil))
  "A terminal the server created: ID, its SESSION and CONN, its PROCESS and BUFFER.
LIMIT is the `outputByteLimit' (nil for none); CHUNKS the output kept
for the server, a list of (TEXT . BYTES) whose last cons is LAST;
BYTES their size in UTF-8; TRUNCATED non-nil once output was dropped.
EXIT is the exit status once the process ended, a plist (:exitCode
:signal); WAITERS the `terminal/wait_for_exit' requests waiting for
it, as (CONN . ID)."
  id session conn process buffer limit chunks last (bytes 0) truncated exit waiters)

(defvar parley-terminals--live (make-hash-table :test #'equal)
  "The terminals the server has not released, by id.")

(defvar parley-terminals--buffers (make-hash-table :test #'equal :weakness 'value)
  "Each terminal's buffer by terminal id, released or not, while the buffer lives.")

(defvar parley-terminals--count 0
  "How many terminals this Emacs made: the number in the next one's id.")

(defconst parley-terminals--emacs-id
  (substring (md5 (format "%s %s %s" (emacs-pid) (float-time) (random))) 0 8)
  "This Emacs's part of its terminals' ids.
A stored session's tool card names a terminal of the Emacs that ran
it: another Emacs's `term-1' must not be taken for this one's.")

(defun parley-terminals--get (params)
  "Return the live terminal PARAMS (`terminal/*' params) name.
Signal a JSON-RPC error when it is unknown, released, or of another session."
  (let ((terminal (gethash (plist-get params :terminalId) parley-terminals--live)))
    (unless (and terminal (equal (parley-terminal-session terminal)
                                 (plist-get params :sessionId)))
      (jsonrpc-error :code -32602
                     :message (format "Unknown terminal %s" (plist-get params :terminalId))))
    terminal))

;;;; The output kept for the server

(defun parley-terminals--utf-8-bytes (text)
  "Return the size of TEXT in UTF-8, in bytes."
  (length (encode-coding-string text 'utf-8 t)))

(defun parley-terminals--valid-text (text)
  "Return TEXT with any byte that was not UTF-8 replaced by U+FFFD.
JSON strings must be Unicode; Emacs keeps an invalid byte as a raw byte."
  (if (string-match-p "[^\0-\x10ffff]" text)
      (cl-substitute-if #xFFFD (lambda (char) (> char #x10FFFF)) text)
    text))

(defun parley-terminals--keep (terminal text)
  "Keep TEXT, new output of TERMINAL, for `terminal/output'.
Whole chunks no longer needed within the limit are dropped."
  (let ((cell (list (cons text (parley-terminals--utf-8-bytes text))))
        (limit (parley-terminal-limit terminal)))
    (if (parley-terminal-chunks terminal)
        (setcdr (parley-terminal-last terminal) cell)
      (setf (parley-terminal-chunks terminal) cell))
    (setf (parley-terminal-last terminal) cell)
    (cl-incf (parley-terminal-bytes terminal) (cdar cell))
    (when limit
      (while (and (parley-terminal-chunks terminal)
                  (>= (- (parley-terminal-bytes terminal)
                         (cdar (parley-terminal-chunks terminal)))
                      limit))
        (cl-decf (parley-terminal-bytes terminal) (cdar (parley-terminal-chunks terminal)))
        (setf (parley-terminal-truncated terminal) t)
        (pop (parley-terminal-chunks terminal)))
      (unless (parley-terminal-chunks terminal)
        (setf (parley-terminal-last terminal) nil)))))

(defun parley-terminals--tail (text limit)
  "Return the end of TEXT that is at most LIMIT bytes in UTF-8.
It starts at a character boundary, so it may be a little shorter."
  (let* ((bytes (encode-coding-string text 'utf-8 t))
         (start (max 0 (- (length bytes) limit))))
    ;; A byte 10xxxxxx continues a character: start after it.
    (while (and (< start (length bytes))
                (= (logand (aref bytes start) #xC0) #x80))
      (cl-incf start))
    (decode-coding-string (substring bytes start) 'utf-8 t)))

(defun parley-terminals--output (terminal)
  "Return TERMINAL's output kept for the server, as (TEXT . TRUNCATED)."
  (let ((text (mapconcat #'car (parley-terminal-chunks terminal) ""))
        (limit (parley-terminal-limit terminal)))
    (if (and limit (> (parley-terminal-bytes terminal) limit))
        (cons (parley-terminals--tail text limit) t)
      (cons text (parley-terminal-truncated terminal)))))

;;;; The process

(defun parley-terminals--signal-name (number)
  "Return the name of the signal NUMBER, such as \"SIGKILL\"."
  (let ((name (cdr (assq number '((1 . "HUP") (2 . "INT") (3 . "QUIT") (6 . "ABRT")
                                  (9 . "KILL") (13 . "PIPE") (14 . "ALRM") (15 . "TERM"))))))
    (if name (concat "SIG" name) (format "SIG%d" number))))

(defun parley-terminals--exit-status (process)
  "Return the exit status of the ended PROCESS as ACP has it: (:exitCode :signal)."
  (if (eq (process-status process) 'signal)
      (list :exitCode nil :signal (parley-terminals--signal-name (process-exit-status process)))
    (list :exitCode (process-exit-status process) :signal nil)))

(defun parley-terminals--insert (buffer process text)
  "Insert TEXT, the PROCESS's output, in its terminal BUFFER, coloured.
A window whose point was at the end follows the output."
  (parley--with-live-buffer buffer
    (let* ((inhibit-read-only t)
           (mark (process-mark process))
           (start (marker-position mark))
           (windows (cl-remove-if-not (lambda (window) (= (window-point window) start))
                                      (get-buffer-window-list buffer nil t)))
           (moving (= (point) start)))
      (save-excursion
        (goto-char mark)
        (insert (ansi-color-apply text))
        ;; A carriage return rewrites its line, as a progress bar expects.
        (comint-carriage-motion start (point))
        (set-marker mark (point)))
      (when moving (goto-char mark))
      (dolist (window windows)
        (set-window-point window mark)))))

(defun parley-terminals--filter (terminal)
  "Return the process filter of TERMINAL."
  (lambda (process text)
    (parley-terminals--keep terminal (parley-terminals--valid-text text))
    (parley-terminals--insert (parley-terminal-buffer terminal) process text)))

(defun parley-terminals--sentinel (terminal)
  "Return the process sentinel of TERMINAL: its exit noted, its waiters answered."
  (lambda (process _event)
    (unless (or (process-live-p process) (parley-terminal-exit terminal))
      (let ((exit (parley-terminals--exit-status process)))
        (setf (parley-terminal-exit terminal) exit)
        (parley-terminals--insert
         (parley-terminal-buffer terminal) process
         (propertize (if (plist-get exit :signal)
                         (format "\n[killed by %s]\n" (plist-get exit :signal))
                       (format "\n[exited with code %d]\n" (plist-get exit :exitCode)))
                     'font-lock-face 'shadow))
        (let ((waiters (parley-terminal-waiters terminal)))
          (setf (parley-terminal-waiters terminal) nil)
          (pcase-dolist (`(,conn . ,id) (reverse waiters))
            (parley--reply conn id exit)))))))

(defun parley-terminal-no-rerun (&rest _)
  "Refuse to run the terminal's command again: it is the server's to run."
  (interactive)
  (user-error "Parley's server ran this command; ask the model to run it again"))

(defvar parley-terminal-mode-map
  (let ((map (make-sparse-keymap)))
    ;; Not `recompile': that would run `compile-command' here.
    (define-key map "g" #'parley-terminal-no-rerun)
    ;; Also on the error links, whose keymap binds it.
    (define-key map [remap compile-goto-error] #'parley-terminal-goto-error)
    map)
  "Keymap of `parley-terminal-mode'.")

(define-derived-mode parley-terminal-mode compilation-mode "Parley-Terminal"
  "Major mode of a terminal in which Parley's server runs a command.
The command's output, in colour; \\<compilation-mode-map>\\[compile-goto-error]
on an error line visits it, as in a compilation.  The command is not
run again from here (\\<parley-terminal-mode-map>\\[parley-terminal-no-rerun] \
only says so)."
  (setq-local compilation-scroll-output nil)
  (setq-local revert-buffer-function #'parley-terminal-no-rerun))

(defvar-local parley-terminals--chat nil
  "The chat buffer of the session whose command this terminal runs.")

(defun parley-terminal-goto-error ()
  "Visit the error at point, beside the chat rather than over it.
In the window already showing its file, else in Parley's own window
\(`parley-windows-beside-chat'); never in the chat's window.  An entry
of the user's `display-buffer-alist' for the file decides first."
  (interactive)
  (let ((display-buffer-alist
         (append display-buffer-alist
                 `((always (display-buffer-reuse-window parley-windows-beside-chat)
                           (parley-chat . ,parley-terminals--chat))))))
    (call-interactively #'compile-goto-error)))

(defun parley-terminals--shown-command (command args)
  "Return the command line that COMMAND with ARGS run, as shown to a person.
The server wraps the command (`env -i', the sandbox): the command line
a shell runs with `-c' is the one it was asked for."
  (let* ((argv (cons command args))
         (shell (cl-position-if
                 (lambda (tail)
                   (and (member (file-name-nondirectory (car tail)) '("sh" "bash" "dash"))
                        (equal (cadr tail) "-c") (cddr tail)))
                 (cl-maplist #'identity argv)
                 :from-end t)))
    (if shell
        (nth (+ shell 2) argv)
      (mapconcat #'identity argv " "))))

(defun parley-terminals--check-create (params cwd)
  "Return the directory the `terminal/create' PARAMS ask for, once checked.
CWD is the session's directory, the default.  Signal a JSON-RPC error
for a missing command, an argument or variable that is not a string,
or a directory that is not an absolute existing one."
  (let ((bad (lambda (what) (jsonrpc-error :code -32602
                                           :message (concat "terminal/create: " what))))
        (dir (or (plist-get params :cwd) cwd)))
    (unless (and (stringp (plist-get params :command))
                 (not (string-empty-p (plist-get params :command))))
      (funcall bad "the command must be a non-empty string"))
    (unless (cl-every #'stringp (plist-get params :args))
      (funcall bad "each argument must be a string"))
    (unless (cl-every (lambda (var) (and (stringp (plist-get var :name))
                                         (not (string-search "=" (plist-get var :name)))
                                         (stringp (plist-get var :value))))
                      (plist-get params :env))
      (funcall bad "each variable must have a name (without =) and a string value"))
    (unless (and (stringp dir) (file-name-absolute-p dir) (file-directory-p dir))
      (funcall bad (format "the directory %s is not an absolute existing directory" dir)))
    (let ((default-directory (file-name-as-directory dir))
          (command (plist-get params :command)))
      (unless (if (file-name-absolute-p command)
                  (and (file-executable-p command) (not (file-directory-p command)))
                (executable-find command))
        (funcall bad (format "there is no program %s to run" command))))
    dir))

(defun parley-terminals--start (terminal command args env dir)
  "Start TERMINAL's process: COMMAND with ARGS, the variables ENV, in DIR."
  (let* ((default-directory (file-name-as-directory dir))
         (process-environment (append env process-environment))
         (process
          (condition-case err
              (make-process :name (concat "parley-terminal-" (parley-terminal-id terminal))
                            :buffer (parley-terminal-buffer terminal)
                            :command (cons command args)
                            ;; A terminal: programs show their colours.
                            :connection-type 'pty
                            :coding 'utf-8-unix
                            :noquery t
                            :filter (parley-terminals--filter terminal)
                            :sentinel (parley-terminals--sentinel terminal))
            (error (kill-buffer (parley-terminal-buffer terminal))
                   (jsonrpc-error :code -32603
                                  :message (format "Cannot run %s: %s" command
                                                   (error-message-string err)))))))
    ;; Nobody types into it: a command that reads its input ends.  It
    ;; may have ended already.
    (ignore-errors (process-send-eof process)
                   (set-process-window-size process 24 120))
    process))

(defun parley-terminals-create (conn params cwd &optional chat)
  "Create the terminal the `terminal/create' PARAMS ask for, from CONN.
CWD is the session's directory, used when PARAMS have none; CHAT its
chat buffer.  Return the answer, (:terminalId ID)."
  (let* ((dir (parley-terminals--check-create params cwd))
         (command (plist-get params :command))
         (args (append (plist-get params :args) nil))
         (shown (parley-terminals--shown-command command args))
         (limit (plist-get params :outputByteLimit))
         (id (format "term-%s-%d" parley-terminals--emacs-id
                     (cl-incf parley-terminals--count)))
         (buffer (generate-new-buffer
                  (format "*parley-terminal: %s*"
                          (truncate-string-to-width (car (split-string shown "\n")) 50
                                                    nil nil "…"))))
         (terminal (parley-terminal--create
                    :id id :session (plist-get params :sessionId) :conn conn :buffer buffer
                    :limit (and (natnump limit) limit))))
    (with-current-buffer buffer
      (parley-terminal-mode)
      (setq parley-terminals--chat chat
            default-directory (file-name-as-directory dir))
      ;; Not in the buffer, whose every line is the command's output
      ;; (and may be an error's location).
      (setq header-line-format (concat " $ " (string-replace "%" "%%" shown))))
    (setf (parley-terminal-process terminal)
          (parley-terminals--start terminal command args
                                   (mapcar (lambda (var) (concat (plist-get var :name) "="
                                                                 (plist-get var :value)))
                                           (plist-get params :env))
                                   dir))
    (puthash id terminal parley-terminals--live)
    (puthash id buffer parley-terminals--buffers)
    (when (and parley-display-terminals chat (get-buffer-window chat t))
      (parley-windows-show buffer chat))
    (list :terminalId id)))

;;;; The other requests

(defun parley-terminals-output (params)
  "Answer `terminal/output' with PARAMS: the output kept, and the exit status."
  (let* ((terminal (parley-terminals--get params))
         (output (parley-terminals--output terminal)))
    (append (list :output (car output) :truncated (if (cdr output) t :json-false))
            (and (parley-terminal-exit terminal)
                 (list :exitStatus (parley-terminal-exit terminal))))))

(defun parley-terminals-wait-for-exit (params)
  "Answer `terminal/wait_for_exit' with PARAMS once the process ended.
Return the exit status when it has, else a `parley--later' that the
process's sentinel answers."
  (let ((terminal (parley-terminals--get params)))
    (or (parley-terminal-exit terminal)
        (parley--later (lambda (conn id)
                         (if (parley-terminal-exit terminal)
                             (parley--reply conn id (parley-terminal-exit terminal))
                           (push (cons conn id) (parley-terminal-waiters terminal))))))))

(defun parley-terminals--kill (terminal)
  "Kill TERMINAL's process (its process group) if it is running."
  (let ((process (parley-terminal-process terminal)))
    (when (process-live-p process)
      (kill-process process))))

(defun parley-terminals-kill (params)
  "Answer `terminal/kill' with PARAMS: the process killed, the terminal kept."
  (parley-terminals--kill (parley-terminals--get params))
  (make-hash-table))

(defun parley-terminals-release (params)
  "Answer `terminal/release' with PARAMS: the process killed, the id forgotten.
The buffer stays, for the user."
  (let ((terminal (parley-terminals--get params)))
    (parley-terminals--kill terminal)
    (remhash (parley-terminal-id terminal) parley-terminals--live))
  (make-hash-table))

(defun parley-terminals-end (conn)
  "Kill and forget the terminals the server on CONN made: it is gone."
  (maphash (lambda (id terminal)
             (when (eq (parley-terminal-conn terminal) conn)
               (parley-terminals--kill terminal)
               (remhash id parley-terminals--live)))
           parley-terminals--live))

;;;; Links from a tool card

(defvar parley-terminal-link-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "RET") #'parley-open-terminal)
    (define-key map [mouse-1] #'parley-open-terminal-click)
    (define-key map [mouse-2] #'parley-open-terminal-click)
    map)
  "Keymap on a link to a terminal.")

(defun parley-terminals-buffer (id)
  "Return the live buffer of the terminal ID, or nil."
  (let ((buffer (gethash id parley-terminals--buffers)))
    (and (buffer-live-p buffer) buffer)))

(defun parley-terminals-link (id)
  "Return the text of a link to the terminal ID's buffer.
When the buffer is gone (killed, or the terminal of an earlier Emacs),
the text says so."
  (let ((buffer (parley-terminals-buffer id)))
    (if buffer
        (propertize (format "[terminal: %s]" (buffer-name buffer))
                    'parley-terminal id 'face 'link
                    'mouse-face 'highlight 'follow-link t 'keymap parley-terminal-link-map
                    'help-echo "RET or mouse-1: show the command's terminal")
      (propertize "[terminal output not kept]" 'face 'shadow))))

(defun parley-open-terminal (&optional pos)
  "Show the terminal whose link is at POS (point)."
  (interactive)
  (let* ((id (get-text-property (or pos (point)) 'parley-terminal))
         (buffer (and id (parley-terminals-buffer id))))
    (unless id (user-error "No terminal here"))
    (unless buffer (user-error "The terminal's buffer was killed"))
    (select-window (or (parley-windows-show buffer (current-buffer))
                       (user-error "No window to show the terminal in")))))

(defun parley-open-terminal-click (event)
  "Show the terminal whose link was clicked in EVENT."
  (interactive "e")
  (let ((position (event-end event)))
    (with-current-buffer (window-buffer (posn-window position))
      (parley-open-terminal (posn-point position)))))

(provide 'parley-terminals)
;;; parley-terminals.el ends here
