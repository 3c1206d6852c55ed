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
;; Each tool is one `parley-tools-define' form: its arguments (from
;; which its input schema and their checks come), its description, its
;; ACP kind, whether it needs permission, and its body.
;;
;; About asking twice: `elisp_eval' is declared with needsPermission,
;; so the server asks the user (`session/request_permission') before it
;; calls the tool.  When the user approved that very call in that
;; question, Emacs does not ask again.  Emacs asks itself (inline in
;; the chat buffer, like the server's question; see
;; `parley--call-editor-tool' in parley-session.el) only when no such
;; approval was seen (the server was configured to auto-approve the
;; tool, or the approval was stored with a resumed session), unless
;; `parley-allow-elisp-eval' is non-nil.  Unapproved, or rejected,
;; `parley-tools-call' does not run the tool.

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
  "Maximum number of characters an Emacs tool returns to the agent.
Longer results are truncated, with a note saying so."
  :type 'integer
  :group 'parley)

;;;; Defining tools

(cl-defstruct (parley-tools--tool (:constructor parley-tools--tool-create)
                                  (:copier nil))
  "An Emacs tool, as `parley-tools-define' declares it.
NAME and DESCRIPTION are the tool's on the wire; ARGUMENTS its
argument declarations; KIND its ACP tool kind; NEEDS-PERMISSION non-nil
when the server must ask before calling it; ALLOWED-BY a variable
whose non-nil value lets it run without the user's approval;
FUNCTION is called with the arguments' plist and returns the text."
  name description arguments kind needs-permission allowed-by function)

(defvar parley-tools--tools nil
  "The Emacs tools, in the order they were defined.")

(defun parley-tools--register (tool)
  "Add TOOL to `parley-tools--tools', replacing a tool of the same name."
  (let ((old (parley-tools--find (parley-tools--tool-name tool))))
    (if old
        (setq parley-tools--tools (cl-substitute tool old parley-tools--tools))
      (setq parley-tools--tools (append parley-tools--tools (list tool))))
    tool))

(defun parley-tools--find (name)
  "Return the tool named NAME, or nil."
  (cl-find name parley-tools--tools :key #'parley-tools--tool-name :test #'equal))

(defmacro parley-tools-define (name arguments description &rest body)
  "Define the Emacs tool NAME, offered to the agent, and what it does.
NAME is a symbol, the tool's name on the wire.  ARGUMENTS declares its
arguments, each (VAR TYPE [DOC] [:name WIRE-NAME] [:required t]
\[:enum VALUES]): TYPE is `string' or `integer', WIRE-NAME the JSON
name (default VAR's name).  The input schema and the checks of the
arguments both come from these.  DESCRIPTION tells the model what
the tool does.  BODY may start with keyword options:

  :kind KIND                 the ACP tool kind (default \"read\")
  :needs-permission BOOL     the server asks the user before a call
  :allowed-by VARIABLE       non-nil VARIABLE lets it run unapproved

The rest of BODY runs with each VAR bound to its checked argument and
returns the text for the agent."
  (declare (indent 2) (debug (symbolp sexp form body)))
  (let (kind needs-permission allowed-by)
    (while (keywordp (car body))
      (pcase (pop body)
        (:kind (setq kind (pop body)))
        (:needs-permission (setq needs-permission (pop body)))
        (:allowed-by (setq allowed-by (pop body)))
        (key (error "Unknown option %s in `parley-tools-define' %s" key name))))
    (let ((input (make-symbol (if arguments "input" "_input"))))
      `(parley-tools--register
        (parley-tools--tool-create
         :name ,(symbol-name name)
         :description ,description
         :arguments ',arguments
         :kind ,(or kind "read")
         :needs-permission ,needs-permission
         :allowed-by ',allowed-by
         :function
         (lambda (,input)
           (let ,(mapcar (lambda (argument)
                           `(,(car argument) (parley-tools--argument ,input ',argument)))
                         arguments)
             ,@body)))))))

(defun parley-tools--wire-name (argument)
  "Return the JSON name of the declared ARGUMENT."
  (or (plist-get (nthcdr 3 argument) :name) (symbol-name (car argument))))

(defun parley-tools--argument (input argument)
  "Return the value of the declared ARGUMENT in INPUT, a plist, checked.
Signal an error that names the argument when it is missing but
required, of another type, or not one of its allowed values."
  (pcase-let* ((`(,_var ,type ,_doc . ,options) argument)
               (name (parley-tools--wire-name argument))
               (value (plist-get input (intern (concat ":" name))))
               (enum (plist-get options :enum)))
    (cond ((and (null value) (not (plist-get options :required))) nil)
          ((not (pcase type
                  ('string (stringp value))
                  ('integer (integerp value))))
           (error "Argument `%s' must be %s" name
                  (if (eq type 'integer) "an integer" "a string")))
          ((and enum (not (member value enum)))
           (error "Argument `%s' must be one of %s" name (string-join enum ", ")))
          (t value))))

(defun parley-tools--input-schema (arguments)
  "Return the JSON schema of a tool input with the declared ARGUMENTS."
  (let ((properties
         (cl-loop for argument in arguments
                  for (_var type doc . options) = argument
                  for enum = (plist-get options :enum)
                  append (list (intern (concat ":" (parley-tools--wire-name argument)))
                               (append (list :type (symbol-name type))
                                       (and enum (list :enum (vconcat enum)))
                                       (and doc (list :description doc))))))
        (required (cl-loop for argument in arguments
                           when (plist-get (nthcdr 3 argument) :required)
                           collect (parley-tools--wire-name argument))))
    (append (list :type "object"
                  ;; `json-serialize' writes nil as null; {} needs a table.
                  :properties (or properties (make-hash-table :size 1)))
            (and required (list :required (vconcat required))))))

(defun parley-tools-specs ()
  "Return the ToolSpec vector the client declares in `initialize'."
  (vconcat
   (mapcar (lambda (tool)
             (list :name (parley-tools--tool-name tool)
                   :description (parley-tools--tool-description tool)
                   :inputSchema (parley-tools--input-schema
                                 (parley-tools--tool-arguments tool))
                   :kind (parley-tools--tool-kind tool)
                   :needsPermission (if (parley-tools--tool-needs-permission tool)
                                        t
                                      :json-false)))
           parley-tools--tools)))

(defun parley-tools-needs-approval-p (name)
  "Return non-nil when the tool NAME may run only with the user's approval."
  (let ((tool (parley-tools--find name)))
    (and tool
         (parley-tools--tool-needs-permission tool)
         (not (let ((allowed-by (parley-tools--tool-allowed-by tool)))
                (and allowed-by (symbol-value allowed-by)))))))

;;;; What the tools do

(defun parley-tools--truncate (text)
  "Return TEXT cut to `parley-tool-output-limit' characters, with a note."
  (if (<= (length text) parley-tool-output-limit)
      text
    (format "%s\n[truncated: %d of %d characters shown]"
            (substring text 0 parley-tool-output-limit)
            parley-tool-output-limit (length text))))

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

;;;; Calling a tool

(defun parley-tools-call (name args &optional approved)
  "Run the Emacs tool NAME with ARGS, a plist; return a callTool result.
APPROVED is non-nil when the user approved this call, or `rejected'
when they refused it; a rejected call never runs, and a tool that
needs approval (see `parley-tools-needs-approval-p') does not run
unapproved.  The result is a plist (:content STRING :isError BOOLEAN)."
  (condition-case err
      (let ((tool (or (parley-tools--find name)
                      (error "Unknown Emacs tool `%s'" name))))
        (when (or (eq approved 'rejected)
                  (and (not approved) (parley-tools-needs-approval-p name)))
          (error "The user did not allow Emacs to run this %s call" name))
        (list :content (parley-tools--truncate
                        (funcall (parley-tools--tool-function tool) args))
              :isError :json-false))
    (quit (list :content "The user quit (C-g) while the tool ran." :isError t))
    (error (list :content (parley-tools--truncate (error-message-string err))
                 :isError t))))

;;;; The tools

(parley-tools-define elisp_eval
    ((code string "One or more Lisp forms." :required t))
  (concat "Evaluate Emacs Lisp forms in the user's running Emacs "
          "(lexical binding) and return the value of the last "
          "form, with anything printed to `standard-output'.  "
          "The current buffer is the one in the selected window.")
  :kind "execute"
  :needs-permission t
  :allowed-by parley-allow-elisp-eval
  (parley-tools--eval code))

(parley-tools-define elisp_describe
    ((symbol string "The symbol's name." :required t)
     (kind string "Which definition to show; default any."
           :enum ("function" "variable" "any")))
  (concat "Describe an Emacs Lisp function or variable: the text "
          "`describe-function' / `describe-variable' show (signature, "
          "documentation, value, where it is defined).")
  (parley-tools--describe symbol kind))

(parley-tools-define buffer_list ()
  (concat "List the user's Emacs buffers: name, major mode, "
          "size, visited file, and whether modified.")
  (parley-tools--buffer-list))

(parley-tools-define buffer_read
    ((buffer string "The buffer's name." :required t)
     (start-line integer nil :name "startLine")
     (end-line integer nil :name "endLine"))
  (concat "Read the text of an Emacs buffer, optionally a "
          "range of lines (1-based, inclusive).  Long text is "
          "truncated.")
  (parley-tools--buffer-read buffer start-line end-line))

(provide 'parley-tools)
;;; parley-tools.el ends here
