;;; parley-usage.el --- A Parley session's usage, as the server reports it  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; The session's tokens, cost, turns and the context's fill, which
;; the header line shows (parley-header.el).  The server adds them up;
;; each report replaces what this buffer knew, through
;; `parley--record-usage' alone.

;;; Code:

(require 'cl-lib)
(require 'parley-transcript)
(require 'parley-wire)

(cl-defstruct (parley--usage (:constructor parley--usage-create) (:copier nil))
  "The session's totals as the server reports them, for the header line.
IN and OUT are the session's tokens, COST its cost in USD and TURNS
its turns (nil while unknown); USED and SIZE are the context's tokens
and window.  The client never adds anything up: each report replaces."
  (in 0) (out 0) cost turns used size)

(defvar-local parley--usage nil
  "This buffer's `parley--usage'; only `parley--record-usage' changes it.")

(defun parley--record-usage (source data)
  "Record in this buffer's usage what SOURCE reports in DATA.
SOURCE is one of:
  `round'    DATA is a `usage_update': the context's fill and window,
             the session's cost, and the session's totals in
             `_meta.parley.session' (the call's own usage, `call', is
             not needed);
  `totals'   DATA is the session's totals (`UsageTotals'), from a
             prompt's or a load's result.
Token counts missing from DATA count as zero; a cost or turn count
that is not a number leaves the known one."
  (let ((usage (or parley--usage (setq parley--usage (parley--usage-create)))))
    (pcase-exhaustive source
      ('round
       (let ((size (plist-get data :size))
             (totals (parley-wire-meta data :session)))
         (setf (parley--usage-used usage) (plist-get data :used)
               (parley--usage-size usage) (and (numberp size) size))
         (when totals
           (parley--record-usage 'totals totals))))
      ('totals
       (setf (parley--usage-in usage) (or (plist-get data :inputTokens) 0)
             (parley--usage-out usage) (or (plist-get data :outputTokens) 0))
       (when (natnump (plist-get data :turns))
         (setf (parley--usage-turns usage) (plist-get data :turns)))))
    ;; `cost' is the session's total in both shapes.
    (let ((cost (plist-get data :cost)))
      (when (numberp (plist-get cost :amount))
        (setf (parley--usage-cost usage) (plist-get cost :amount))))
    (force-mode-line-update)))

(provide 'parley-usage)
;;; parley-usage.el ends here
