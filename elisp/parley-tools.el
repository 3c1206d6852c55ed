;;; parley-tools.el --- Emacs tools offered to the Parley agent  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; The tools the Emacs client declares to the Parley server in
;; `initialize' (under clientCapabilities._meta.parley.tools) and runs
;; when the server calls `_parley/editor/callTool':
;;
;;   elisp_eval      evaluate Emacs Lisp (asks first, see below)
;;   elisp_describe  the text of `describe-function' / `describe-variable'
;;   buffer_list     the live buffers, with mode, size and file
;;   buffer_read     a buffer's text, bounded
;;
;; About asking twice: `elisp_eval' is declared with needsPermission,
;; so the server asks the user (`session/request_permission') before it
;; calls the tool.  When the user approved that very call in that
;; question, Emacs does not ask again.  Emacs asks itself (inline in
;; the chat buffer, like the server's question; see parley.el) only
;; when no such approval was seen (the server was configured to
;; auto-approve the tool, or the approval was stored with a resumed
;; session), unless `parley-allow-elisp-eval' is non-nil.  Unapproved,
;; `parley-tools-call' does not evaluate.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'help)

(defcustom parley-allow-elisp-eval nil
  "Non-nil means `elisp_eval' runs without a confirmation from Emacs.
When nil, Emacs asks before evaluating code the agent sent, unless
the user already approved that very call in the server's permission
prompt (choosing \"allow always\" there also covers the later calls
of the session).  The server's own permission prompt is governed by
its tool policy, not by this option."
  :type 'boolean
  :group 'parley)

(defcustom parley-tool-output-limit 20000
  "Maximum number of characters a Emacs tool returns to the agent.
Longer results are truncated, with a note saying so."
  :type 'integer
  :group 'parley)

(defun parley-tools--object (&rest plist)
  "Return PLIST as a JSON object, or an empty hash table when it is nil.
`json-serialize' writes nil as null; an empty object needs a table."
  (or plist (make-hash-table :size 1)))

(defun parley-tools-specs ()
  "Return the ToolSpec vector the client declares in `initialize'."
  (vector
   (list :name "elisp_eval"
         :description (concat
                       "Evaluate Emacs Lisp forms in the user's running Emacs "
                       "(lexical binding) and return the value of the last "
                       "form, with anything printed to `standard-output'.  "
                       "The current buffer is the one in the selected window.")
         :inputSchema (list :type "object"
                            :properties
                            (list :code (list :type "string"
                                              :description "One or more Lisp forms."))
                            :required ["code"])
         :kind "execute"
         :needsPermission t)
   (list :name "elisp_describe"
         :description (concat
                       "Describe an Emacs Lisp function or variable: the text "
                       "`describe-function' / `describe-variable' show (signature, "
                       "documentation, value, where it is defined).")
         :inputSchema (list :type "object"
                            :properties
                            (list :symbol (list :type "string"
                                                :description "The symbol's name.")
                                  :kind (list :type "string"
                                              :enum ["function" "variable" "any"]
                                              :description "Which definition to show; default any."))
                            :required ["symbol"])
         :kind "read"
         :needsPermission :json-false)
   (list :name "buffer_list"
         :description (concat "List the user's Emacs buffers: name, major mode, "
                              "size, visited file, and whether modified.")
         :inputSchema (list :type "object" :properties (parley-tools--object))
         :kind "read"
         :needsPermission :json-false)
   (list :name "buffer_read"
         :description (concat "Read the text of an Emacs buffer, optionally a "
                              "range of lines (1-based, inclusive).  Long text is "
                              "truncated.")
         :inputSchema (list :type "object"
                            :properties
                            (list :buffer (list :type "string"
                                                :description "The buffer's name.")
                                  :startLine (list :type "integer")
                                  :endLine (list :type "integer"))
                            :required ["buffer"])
         :kind "read"
         :needsPermission :json-false)))

(defun parley-tools--truncate (text)
  "Return TEXT cut to `parley-tool-output-limit' characters, with a note."
  (if (<= (length text) parley-tool-output-limit)
      text
    (format "%s\n[truncated: %d of %d characters shown]"
            (substring text 0 parley-tool-output-limit)
            parley-tool-output-limit (length text))))

(defun parley-tools--string-arg (args key &optional optional)
  "Return the string argument KEY of ARGS.
Signal an error when it is missing, unless OPTIONAL."
  (let ((value (plist-get args key)))
    (cond ((stringp value) value)
          ((and optional (null value)) nil)
          (t (error "Argument `%s' must be a string"
                    (substring (symbol-name key) 1))))))

(defun parley-tools--read-forms (code)
  "Read all Lisp forms in the string CODE and return them in order."
  (with-temp-buffer
    (insert code)
    (goto-char (point-min))
    (let (forms)
      (condition-case nil
          (while t (push (read (current-buffer)) forms))
        (end-of-file nil))
      (nreverse forms))))

(defun parley-tools-needs-approval-p (name)
  "Return non-nil when the tool NAME may run only with the user's approval."
  (and (equal name "elisp_eval") (not parley-allow-elisp-eval)))

(defun parley-tools--eval (code)
  "Evaluate the forms in CODE and return a description of the outcome."
  (let ((forms (parley-tools--read-forms code))
        (out (generate-new-buffer " *parley-eval-output*"))
        value)
    (unwind-protect
        (progn
          (with-current-buffer (window-buffer (selected-window))
            (let ((standard-output out))
              (dolist (form forms)
                (setq value (eval form t)))))
          (let ((printed (with-current-buffer out (buffer-string)))
                (repr (let ((print-length 200) (print-level 12))
                        (prin1-to-string value))))
            (if (string-empty-p printed)
                repr
              (format "%s\n=> %s" printed repr))))
      (kill-buffer out))))

(defun parley-tools--help-text (describe symbol)
  "Run the help command DESCRIBE on SYMBOL and return the help text."
  (save-window-excursion
    (let ((inhibit-message t)
          (help-window-select nil))
      (funcall describe symbol)
      (with-current-buffer (help-buffer)
        (string-trim (buffer-substring-no-properties (point-min) (point-max)))))))

(defun parley-tools--describe (name kind)
  "Return the help text for the symbol NAME; KIND narrows it.
KIND is \"function\", \"variable\", \"any\" or nil (any)."
  (let ((symbol (intern-soft name))
        (kind (or kind "any"))
        parts)
    (unless symbol
      (error "No symbol named `%s' is known to this Emacs" name))
    (when (and (member kind '("any" "function")) (fboundp symbol))
      (push (parley-tools--help-text #'describe-function symbol) parts))
    (when (and (member kind '("any" "variable"))
               (or (boundp symbol) (get symbol 'variable-documentation)))
      (push (parley-tools--help-text #'describe-variable symbol) parts))
    (unless parts
      (error "`%s' is not a %s" name
             (if (equal kind "any") "function or variable" kind)))
    (string-join (nreverse parts) "\n\n")))

(defun parley-tools--buffer-list ()
  "Return a table of the live, non-internal buffers."
  (mapconcat
   (lambda (buffer)
     (with-current-buffer buffer
       (format "%s\t%s\t%d chars%s%s"
               (buffer-name) major-mode (buffer-size)
               (if buffer-file-name (concat "\t" buffer-file-name) "")
               (if (and buffer-file-name (buffer-modified-p)) "\tmodified" ""))))
   (cl-remove-if (lambda (b) (string-prefix-p " " (buffer-name b)))
                 (buffer-list))
   "\n"))

(defun parley-tools--buffer-read (name start-line end-line)
  "Return the text of buffer NAME, lines START-LINE to END-LINE if given."
  (let ((buffer (get-buffer name)))
    (unless (buffer-live-p buffer)
      (error "No buffer named `%s'" name))
    (with-current-buffer buffer
      (save-restriction
        (widen)
        (save-excursion
          (let ((beg (if start-line
                         (progn (goto-char (point-min))
                                (forward-line (1- (max 1 start-line)))
                                (point))
                       (point-min)))
                (end (if end-line
                         (progn (goto-char (point-min))
                                (forward-line (max 0 end-line))
                                (point))
                       (point-max))))
            (buffer-substring-no-properties beg (max beg end))))))))

(defun parley-tools-call (name args &optional approved)
  "Run the Emacs tool NAME with ARGS, a plist; return a callTool result.
APPROVED non-nil means the user approved this call; a tool that
needs approval (see `parley-tools-needs-approval-p') does not run
without it.  The result is a plist (:content STRING :isError BOOLEAN)."
  (condition-case err
      (let ((content
             (pcase name
               ("elisp_eval"
                (let ((code (parley-tools--string-arg args :code)))
                  (if (or approved (not (parley-tools-needs-approval-p name)))
                      (parley-tools--eval code)
                    (error "The user did not allow Emacs to evaluate this code"))))
               ("elisp_describe"
                (parley-tools--describe
                 (parley-tools--string-arg args :symbol)
                 (parley-tools--string-arg args :kind t)))
               ("buffer_list" (parley-tools--buffer-list))
               ("buffer_read"
                (parley-tools--buffer-read
                 (parley-tools--string-arg args :buffer)
                 (plist-get args :startLine) (plist-get args :endLine)))
               (_ (error "Unknown Emacs tool `%s'" name)))))
        (list :content (parley-tools--truncate content) :isError :json-false))
    (quit (list :content "The user quit (C-g) while the tool ran." :isError t))
    (error (list :content (parley-tools--truncate (error-message-string err))
                 :isError t))))

(provide 'parley-tools)
;;; parley-tools.el ends here
