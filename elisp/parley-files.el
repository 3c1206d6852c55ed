;;; parley-files.el --- The workspace's files, as Emacs holds them  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; The client's side of ACP's `fs/read_text_file' and
;; `fs/write_text_file': the server reads a file as Emacs has it (a
;; buffer visiting it, saved or not, else the disk), and writes an
;; edit into the buffer visiting the file (one undoable change, point
;; kept, saved), or to the disk when no buffer visits it.  Only files
;; inside the session's workspace are served.
;;
;; Also: reverting the buffers of files the server changed on disk
;; itself (a turn undone), without asking when they hold no changes
;; of the user's.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'subr-x)

(defun parley-files--error (code format-string &rest args)
  "Signal a JSON-RPC error CODE, the message FORMAT-STRING formatted with ARGS."
  (jsonrpc-error :code code :message (apply #'format format-string args)))

(defun parley-files-resolve (path workspace)
  "Return PATH as an absolute file name inside WORKSPACE, or signal an error.
A relative PATH is taken from WORKSPACE.  Symbolic links are
followed before the check, so a link out of the workspace is refused."
  (unless (and (stringp path) (not (string-empty-p path)))
    (parley-files--error -32602 "No path given"))
  (unless (and workspace (file-directory-p workspace))
    (parley-files--error -32002 "The session's workspace is unknown"))
  (let ((file (expand-file-name path (file-name-as-directory workspace))))
    (unless (file-in-directory-p (file-truename file) (file-truename workspace))
      (parley-files--error -32602 "%s is outside the session's workspace %s"
                           path workspace))
    file))

(defun parley-files--buffer (file)
  "Return the live buffer visiting FILE, or nil."
  (or (get-file-buffer file)
      (find-buffer-visiting file)))

(defun parley-files--lines (text line limit)
  "Return TEXT from the 1-based LINE on, at most LIMIT lines (nil: all)."
  (if (and (null line) (null limit))
      text
    (with-temp-buffer
      (insert text)
      (goto-char (point-min))
      (forward-line (1- (max 1 (or line 1))))
      (let ((start (point)))
        (if limit (forward-line (max 0 limit)) (goto-char (point-max)))
        (buffer-substring-no-properties start (point))))))

(defun parley-files-read (file &optional line limit)
  "Return the text of FILE as Emacs has it, from LINE, at most LIMIT lines.
A buffer visiting FILE gives its text, saved or not; otherwise the
file is read from the disk (as UTF-8).  A missing file is error -32002."
  (let* ((buffer (parley-files--buffer file))
         (text (cond
                (buffer (with-current-buffer buffer
                          (save-restriction
                            (widen)
                            (buffer-substring-no-properties (point-min) (point-max)))))
                ((file-regular-p file)
                 (with-temp-buffer
                   (let ((coding-system-for-read 'utf-8-unix))
                     (condition-case err
                         (insert-file-contents file)
                       (file-error (parley-files--error -32603 "Cannot read %s: %s" file
                                                        (error-message-string err)))))
                   (buffer-string)))
                ((file-exists-p file)
                 (parley-files--error -32602 "%s is not a regular file" file))
                (t (parley-files--error -32002 "No such file: %s" file)))))
    (parley-files--lines text line limit)))

(defun parley-files--replace-buffer (content)
  "Replace the current buffer's text with CONTENT as one undoable change.
Point and markers stay where the text around them is unchanged."
  (let ((source (generate-new-buffer " *parley new content*"))
        (group (prepare-change-group)))
    (unwind-protect
        (progn
          (with-current-buffer source (insert content))
          (activate-change-group group)
          (save-restriction
            (widen)
            (let ((inhibit-read-only t))
              ;; Compares the texts and changes only what differs; a
              ;; large one that takes too long is replaced whole.
              (replace-buffer-contents source 1.0)))
          (accept-change-group group)
          (undo-amalgamate-change-group group))
      (kill-buffer source))))

(defun parley-files--save-buffer ()
  "Save the current buffer as it is, without asking anything.
The server's text is what lands on the disk: the save hooks and
`require-final-newline' do not change it; a file changed on disk
since it was visited is overwritten, as the user approved the edit."
  (let ((before-save-hook nil)
        (write-contents-functions nil)
        (require-final-newline nil)
        (inhibit-message t))
    (unless (verify-visited-file-modtime (current-buffer))
      (set-visited-file-modtime))
    ;; Saving would ask to create a folder that is gone.
    (make-directory (file-name-directory buffer-file-name) t)
    (save-buffer)))

(defun parley-files-write (file content)
  "Write CONTENT to FILE the way the user would.
A buffer visiting FILE gets CONTENT as one undoable change, point
kept, and is saved; without one the file is written (its parent
folders created).  FILE must be its own true name: the server sends
the place it resolved, so a symbolic link on its way now (one a
process swapped in since) would lead the write elsewhere, such as
into .git; it is refused, nothing written."
  (let ((true (file-truename file)))
    (unless (string= true (expand-file-name file))
      (parley-files--error -32602 "%s now leads to %s through a symbolic link: not written"
                           file true)))
  (let ((buffer (parley-files--buffer file)))
    (if buffer
        (with-current-buffer buffer
          (when (eq (coding-system-eol-type buffer-file-coding-system) 1)
            ;; The buffer holds the lines without their CR, which saving
            ;; puts back.
            (setq content (string-replace "\r\n" "\n" content)))
          (let ((create-lockfiles nil))
            (parley-files--replace-buffer content)
            (parley-files--save-buffer)))
      (when (file-directory-p file)
        (parley-files--error -32602 "%s is a directory" file))
      (make-directory (file-name-directory file) t)
      (let ((coding-system-for-write 'utf-8-unix))
        (write-region content nil file nil 'silent)))))

(defun parley-files-revert (file)
  "Revert the buffer visiting FILE to what is now on the disk.
Return what was done: nil (no buffer, or nothing changed), `reverted',
`killed' (the file is gone, the buffer held no changes), or
`modified' (the buffer holds unsaved changes and is left alone)."
  (let ((buffer (parley-files--buffer file)))
    (when buffer
      (with-current-buffer buffer
        (cond ((buffer-modified-p) 'modified)
              ((not (file-exists-p file))
               (kill-buffer buffer)
               'killed)
              ((not (verify-visited-file-modtime buffer))
               (revert-buffer t t t)
               'reverted))))))

(provide 'parley-files)
;;; parley-files.el ends here
