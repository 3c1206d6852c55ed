;;; parley-plan.el --- The model's plan, shown below a Parley transcript  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; The model keeps a plan (its `update_plan' tool): the server sends
;; it whole as a `plan' update, `{entries: [{content, status,
;; priority}]}', each time it changes, and again when a stored session
;; is replayed.  The last one is shown at the bottom of the
;; transcript, above the prompt, one line per entry with a box ticked
;; as it is done, updated in place; the header line says how far it
;; is.  It is an overlay's text, not the transcript's: the blocks and
;; markers of the transcript never move for it, and it is not part of
;; an export.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'parley-transcript)

(defface parley-plan-header '((t :inherit parley-section-header))
  "Face for the title of the plan."
  :group 'parley)

(defface parley-plan-done '((t :inherit shadow :strike-through t))
  "Face for an entry of the plan that is completed."
  :group 'parley)

(defface parley-plan-current '((t :inherit bold))
  "Face for the entry of the plan in progress."
  :group 'parley)

(parley--define-buffer-state
  (parley--plan "The model's plan as last sent: a list of entries (:content :status :priority).")
  (parley--plan-overlay "The overlay that shows the plan below the transcript."))

(defconst parley--plan-boxes
  '(("completed" "☑" parley-plan-done)
    ("in_progress" "◐" parley-plan-current))
  "The box and face of an entry by its status; any other status is pending: ☐.")

(defun parley--plan-entry-string (entry)
  "Return the line of the plan ENTRY."
  (pcase-let* ((`(,box ,face) (or (cdr (assoc (plist-get entry :status) parley--plan-boxes))
                                  '("☐" nil)))
               (content (plist-get entry :content))
               (priority (plist-get entry :priority)))
    (concat "  " box " "
            (propertize (if (stringp content) (string-trim content) "") 'face face)
            (if (member priority '("high" "low"))
                (propertize (format "  (%s)" priority) 'face 'shadow)
              "")
            "\n")))

(defun parley--plan-done ()
  "Return how many entries of the plan are completed, and of how many: \"2/5\"."
  (format "%d/%d"
          (cl-count "completed" parley--plan
                    :key (lambda (entry) (plist-get entry :status)) :test #'equal)
          (length parley--plan)))

(defun parley--plan-progress ()
  "Return how far the plan is, such as \"plan 2/5\"; nil when there is none."
  (when parley--plan
    (concat "plan " (parley--plan-done))))

(defun parley--plan-string ()
  "Return the text of the plan, or the empty string when there is none."
  (if parley--plan
      ;; On a line of its own, whether or not the text above ended one.
      (concat "\n" (propertize "Plan" 'face 'parley-plan-header)
              (propertize (format "  %s done\n" (parley--plan-done)) 'face 'shadow)
              (mapconcat #'parley--plan-entry-string parley--plan ""))
    ""))

(defun parley--plan-update (update)
  "Show the plan of the `plan' UPDATE in place of the one shown."
  (setq parley--plan (cl-remove-if-not #'consp (append (plist-get update :entries) nil)))
  (unless (overlayp parley--plan-overlay)
    ;; Empty, at the end of the transcript, and advancing past what is
    ;; inserted there: its `before-string' stays below the last words,
    ;; above the prompt, where it can be seen however long the chat.
    (setq parley--plan-overlay (make-overlay parley--output parley--output nil t t))
    (overlay-put parley--plan-overlay 'parley-plan t))
  (overlay-put parley--plan-overlay 'before-string (parley--plan-string))
  (force-mode-line-update))

(provide 'parley-plan)
;;; parley-plan.el ends here
