;;; parley-display.el --- What a user reads about a turn: Parley's display rules  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; The display rules every Parley client shares (docs/display.md), in
;; one place for Emacs: token counts, cost, the context's fill, a
;; tool's input and the summary of its result, times, and the controls
;; shown escaped in what the user judges.  The rest of the
;; package formats these only through this file.  Why a turn stopped is
;; not among them: the server says it, in a notice (parley-transcript.el
;; shows it as it comes).  tests/display-cases.json holds the cases
;; every client checks.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'iso8601)

(defvar json-encoding-pretty-print)
(defvar json-encoding-default-indentation)
(defvar json-false)
(defvar json-null)
(declare-function json-encode "json" (object))

;;;; Usage

(defun parley-display-tokens (n)
  "Return the token count N by docs/display.md: `950', `1.2k', `12k', `1.2M'."
  (let ((n (or n 0)))
    (cond ((< n 1000) (number-to-string n))
          ((< n 10000) (format "%.1fk" (/ n 1000.0)))
          ((< n 1000000) (format "%dk" (floor n 1000)))
          (t (format "%.1fM" (/ n 1000000.0))))))

(defun parley-display-cost (amount)
  "Return the USD AMOUNT: `$1.25', `$0.0123', `$0'; nil is `cost unknown'."
  (cond ((not (numberp amount)) "cost unknown")
        ((zerop amount) "$0")
        ((>= amount 1) (format "$%.2f" amount))
        (t (format "$%.4f" amount))))

(defun parley-display-context (used size)
  "Return the context's fill: USED tokens of the window SIZE.
`context 12k/200k (6%)' when SIZE is known (a positive number),
`context 12k' when it is not, never `/0'."
  (if (and (numberp size) (> size 0))
      (format "context %s/%s (%d%%)" (parley-display-tokens used)
              (parley-display-tokens size) (round (* 100.0 (or used 0)) size))
    (format "context %s" (parley-display-tokens used))))

;;;; Tool input and result

(defconst parley-display--code-arguments
  '(("python" :code "python")
    ("lisp\\|emacs" :form "elisp")
    ("lisp\\|emacs" :code "elisp"))
  "Tools whose argument is code: (TOOL-REGEXP KEY LANGUAGE).
TOOL-REGEXP matches the tool's name (`python_eval', `elisp_eval') or
the title the server gives its calls.  `command' is any tool's, in `sh'.")

(defun parley-display--code-argument (tool input)
  "Return (KEY . LANGUAGE) of the code argument in the INPUT of TOOL, or nil.
TOOL is the tool's name or its call's title."
  (and (consp input) (keywordp (car input))
       (or (let ((case-fold-search t))
             (cl-loop for (re key language) in parley-display--code-arguments
                      when (and (stringp tool) (string-match-p re tool)
                                (stringp (plist-get input key)))
                      return (cons key language)))
           (and (stringp (plist-get input :command)) (cons :command "sh")))))

(defun parley-display--json (value indent)
  "Return VALUE as JSON indented by two spaces, starting at INDENT.
A string with newlines is shown as its lines, each indented below."
  (let ((pad (make-string indent ?\s))
        (inner (make-string (+ indent 2) ?\s)))
    (cond
     ((and (consp value) (keywordp (car value)))
      (concat "{\n"
              (mapconcat
               (lambda (pair)
                 (concat inner (parley-display--json-scalar
                                (substring (symbol-name (car pair)) 1))
                         ":"
                         (let ((v (cadr pair)))
                           (if (and (stringp v) (string-search "\n" v))
                               (concat "\n" (replace-regexp-in-string
                                             "^" (concat inner "  ")
                                             (string-trim-right v "\n")))
                             (concat " " (parley-display--json v (+ indent 2)))))))
               (cl-loop for (k v) on value by #'cddr collect (list k v))
               ",\n")
              "\n" pad "}"))
     ((and (vectorp value) (> (length value) 0))
      (concat "[\n"
              (mapconcat (lambda (v) (concat inner (parley-display--json v (+ indent 2))))
                         value ",\n")
              "\n" pad "]"))
     ((vectorp value) "[]")
     (t (parley-display--json-scalar value)))))

(defun parley-display--json-scalar (value)
  "Return the JSON text of the scalar VALUE, parsed by jsonrpc.el."
  (cond ((eq value :json-false) "false")
        ((eq value t) "true")
        ((null value) "null")
        ((stringp value)
         (require 'json)
         (let ((json-false :json-false) (json-null nil))
           (json-encode value)))
        ((numberp value) (number-to-string value))
        (t (prin1-to-string value))))

(defun parley-display-tool-input (tool input)
  "Return the input INPUT of TOOL (its name or title) as (LANGUAGE . TEXT).
A code argument (`code' of python_eval, `form' of elisp_eval,
`command' of any tool) is its code, LANGUAGE `python', `elisp' or
`sh'; any other input is JSON indented by two spaces, LANGUAGE nil."
  (let ((code (parley-display--code-argument tool input)))
    (if code
        (cons (cdr code) (string-trim-right (plist-get input (car code)) "\n+"))
      (cons nil (parley-display--json input 0)))))

(defconst parley-display--section-labels '("stdout:" "stderr:" "result:")
  "Lines that only label a section of a tool's result.")

(defun parley-display-tool-summary (text &optional error)
  "Return the summary of a tool result TEXT: its first meaningful lines.
The first three non-blank lines, label lines (`stdout:') dropped, each
cut at 120 characters with `…'; `(no output)' when none is left.
With ERROR, the summary of a failed call, which starts with ERROR's line."
  (let* ((lines (cl-remove-if
                 (lambda (line)
                   (or (string-empty-p (string-trim line))
                       (member (string-trim line) parley-display--section-labels)))
                 (split-string (or text "") "\n")))
         (lines (if (stringp error)
                    (cons (car (split-string error "\n")) (remove error lines))
                  lines))
         (lines (mapcar (lambda (line)
                          (let ((line (string-trim-right line)))
                            (if (> (length line) 120)
                                (concat (substring line 0 120) "…")
                              line)))
                        (seq-take lines 3))))
    (if lines (string-join lines "\n") "(no output)")))

;;;; What the user judges

;; Controls, format characters (bidi among them), surrogates: what
;; `unicode-category-table' files under Cc, Cf, Cs, as one regexp.
(defconst parley-display--controls-regexp
  (let (ranges)
    (map-char-table (lambda (key category)
                      (when (memq category '(Cc Cf Cs))
                        ;; (A range's cons is reused by `map-char-table': copied.)
                        (push (if (consp key) (cons (car key) (cdr key)) (cons key key))
                              ranges)))
                    unicode-category-table)
    (rx-to-string `(any ,@ranges) t))
  "A regexp that matches one control or format character.")

(defun parley-display--escape (char)
  "Return CHAR written as an escape: `\\n', `\\x1b', `\\u202e'."
  (pcase char
    (?\n "\\n")
    (?\r "\\r")
    (_ (format (cond ((< char #x100) "\\x%02x")
                     ((< char #x10000) "\\u%04x")
                     (t "\\U%08x"))
               char))))

(defun parley-display-escape-controls (text &optional one-line)
  "Return TEXT with its control and format characters shown as escapes.
Tab and newline are kept (with ONE-LINE, a newline is escaped too):
what a user judges, a command, a title, a path, cannot hide code or
reorder itself with bidi controls (docs/display.md)."
  (let ((case-fold-search nil))
    (replace-regexp-in-string
     parley-display--controls-regexp
     (lambda (match)
       (let ((char (aref match 0)))
         (if (or (eq char ?\t) (and (eq char ?\n) (not one-line)))
             match
           (parley-display--escape char))))
     text t t)))

;;;; Times

(defun parley-display--parse-time (time)
  "Return TIME (an ISO 8601 string, a Lisp time or seconds) as a Lisp time."
  (cond ((stringp time)
         (condition-case nil
             (encode-time (iso8601-parse time))
           (error nil)))
        ((numberp time) (seconds-to-time time))
        (t time)))

(defun parley-display-time (time &optional now)
  "Return TIME in local time, briefly.
Today `14:05', this year `Nov 22 14:05', older `2025-11-22 14:05'.
TIME is an ISO 8601 string (as the server sends), a Lisp time or
seconds; NOW (default the current time) decides which.
An unreadable TIME is returned as it is."
  (let ((parsed (parley-display--parse-time time)))
    (if (not parsed)
        (format "%s" (or time ""))
      (let* ((now (or now (current-time)))
             (day (lambda (tm) (format-time-string "%F" tm)))
             (year (lambda (tm) (format-time-string "%Y" tm))))
        (format-time-string
         (cond ((equal (funcall day parsed) (funcall day now)) "%H:%M")
               ((equal (funcall year parsed) (funcall year now)) "%b %-d %H:%M")
               (t "%Y-%m-%d %H:%M"))
         parsed)))))

(provide 'parley-display)
;;; parley-display.el ends here
