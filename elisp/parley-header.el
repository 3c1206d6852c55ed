;;; parley-header.el --- The header line and mode line of a Parley chat buffer  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; What the session is doing (working, waiting for an answer, not
;; connected), its model and mode, the user's kernel it is attached
;; to (parley-kernels.el), how far the plan is, the usage the server reported
;; (parley-usage.el) by the rules of parley-display.el, the context
;; waiting for the next prompt and the session's title.

;;; Code:

(require 'jsonrpc)
(require 'parley-display)
(require 'parley-input)
(require 'parley-kernels)
(require 'parley-plan)
(require 'parley-question)
(require 'parley-session)
(require 'parley-transcript)
(require 'parley-usage)

;;;; Header line and mode line

(defface parley-mode '((t :inherit font-lock-type-face))
  "Face for the session's mode (Ask, Accept edits, Plan) in the header line."
  :group 'parley)

(defface parley-kernel '((t :inherit font-lock-constant-face))
  "Face for the user's kernel a session is attached to, in the header line."
  :group 'parley)

(defun parley--status ()
  "Return what the session is doing, as (GLYPH WORDS FACE); nil when idle."
  (cond (parley--questions
         (list "●" (substitute-command-keys
                    "waiting for you: \\<parley-chat-mode-map>\\[parley-goto-question] \
goes to the question")
               'warning))
        (parley--busy (list "●" "working" 'warning))
        ((not (and parley--conn (jsonrpc-running-p parley--conn)))
         (list "○" "not connected" 'shadow))))

(defun parley--mode-line-literal (string)
  "Return STRING with each % doubled, for a mode line to show as it is.
A mode line construct reads `%' as a %-construct: `(2%)' would lose
its `%' and a title's `%-' would fill the line with dashes.  Each `%'
keeps the text properties (the face) it had."
  (let ((start 0) (parts nil) pos)
    (while (setq pos (string-search "%" string start))
      (push (substring string start (1+ pos)) parts)
      (push (substring string pos (1+ pos)) parts)
      (setq start (1+ pos)))
    (push (substring string start) parts)
    (apply #'concat (nreverse parts))))

(defun parley--header-line ()
  "Return the header line of a chat buffer, for `header-line-format'.
The status comes first, so that a narrow window still shows it.  Its
`%' are doubled (`parley--mode-line-literal'): the line is a mode
line construct."
  (parley--mode-line-literal (parley--header-text)))

(defun parley--header-text ()
  "Return the text of the header line, as it is shown."
  (let* ((u (or parley--usage (parley--usage-create)))
         (cost (parley--usage-cost u))
         (turns (parley--usage-turns u))
         (status (parley--status)))
    (concat
     " "
     (if status
         (concat (propertize (concat (nth 0 status) " " (nth 1 status)) 'face (nth 2 status))
                 "  ")
       "")
     (propertize "Parley" 'face 'bold)
     " " (or parley--model "default model")
     (let ((mode (parley--mode-name)))
       (if mode (concat "  " (propertize mode 'face 'parley-mode)) ""))
     (let ((kernel (parley--kernel-shown)))
       (if kernel (concat "  " (propertize kernel 'face 'parley-kernel)) ""))
     (let ((plan (parley--plan-progress)))
       (if plan (concat "  " plan) ""))
     (format "  tokens %s in / %s out" (parley-display-tokens (parley--usage-in u))
             (parley-display-tokens (parley--usage-out u)))
     (if (numberp cost) (concat "  " (parley-display-cost cost)) "")
     (if turns (format "  %d turn%s" turns (if (= turns 1) "" "s")) "")
     (if (parley--usage-used u)
         (concat "  " (parley-display-context (parley--usage-used u) (parley--usage-size u)))
       "")
     (if parley--context (format "  +%d context" (length parley--context)) "")
     (if parley--title (concat "  " (propertize parley--title 'face 'italic)) ""))))

(defun parley--mode-line-status ()
  "Return the status for the mode line, after the mode's name."
  (pcase (parley--status)
    ('nil "")
    (`(,glyph ,_ ,face)
     (propertize (concat " " glyph (cond (parley--questions "waiting")
                                         (parley--busy "working")
                                         (t "off")))
                 'face face))))

(put 'parley--mode-line-status 'risky-local-variable t)

(provide 'parley-header)
;;; parley-header.el ends here
