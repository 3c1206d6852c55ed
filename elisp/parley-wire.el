;;; parley-wire.el --- The wire's names the package uses, in one table  -*- lexical-binding: t; -*-

;; Copyright (C) 2025 Parley contributors

;; Author: Parley contributors
;; SPDX-License-Identifier: MIT

;; This file is part of the Parley package; see parley.el.

;;; Commentary:

;; The names of the wire (docs/protocol.md) that the package dispatches
;; on and reaches into, declared once: ACP's kinds of `session/update'
;; (with the package's name for each), and Parley's keys under
;; `_meta.parley'.  The rest of the package names a kind or a key only
;; through this file: a kind by its symbol, a key through
;; `parley-wire-meta', which refuses, when it is expanded, a key the
;; table does not declare.  An update's own fields (`:toolCallId',
;; `:content') are ACP's, read where they are used.

;;; Code:

(defconst parley-wire-update-kinds
  '((message . "agent_message_chunk")
    (thought . "agent_thought_chunk")
    (user . "user_message_chunk")
    (tool-call . "tool_call")
    (tool-call-update . "tool_call_update")
    (usage . "usage_update")
    (plan . "plan")
    (session-info . "session_info_update")
    (config-options . "config_option_update")
    (commands . "available_commands_update")
    (mode . "current_mode_update"))
  "ACP's kinds of `session/update' the package handles.
Each is (NAME . KIND): the package's NAME for it, and its KIND on the
wire (`sessionUpdate').")

(defconst parley-wire-meta-keys
  '(;; Of a message: a notice (its level), a revision, a replayed stop,
    ;; a command turn.
    :notice :replaces :stopReason :command
    ;; Of a tool call: not made after all.
    :superseded
    ;; Of a usage update and a prompt's result: the session's totals;
    ;; of a result, the turn's statistics, a retry's answer, a refused
    ;; command not kept.
    :session :turn :replaced :kept
    ;; Of `initialize', `session/new', `session/load', `session/list',
    ;; and of a prompt sent again.
    :tools :revisions :defaultModel :model :usage :turns :cost :retry
    ;; Of an answer to a question: the user's words for the model.
    :note
    ;; Of `session/resume': the user's kernel the session attaches to.
    :kernel)
  "Parley's keys under `_meta.parley' that the package reads or sends.")

(defun parley-wire-kind (update)
  "Return the package's name of UPDATE's kind.
Nil for a kind the package does not handle."
  (car (rassoc (plist-get update :sessionUpdate) parley-wire-update-kinds)))

(defun parley-wire-update (name &rest fields)
  "Return a `session/update' of the kind NAME with FIELDS (a plist)."
  (let ((kind (or (alist-get name parley-wire-update-kinds)
                  (error "No update kind %s in `parley-wire-update-kinds'" name))))
    (cons :sessionUpdate (cons kind fields))))

(defun parley-wire--key (key)
  "Return KEY, a key of `parley-wire-meta-keys'; signal an error for another."
  (if (memq key parley-wire-meta-keys)
      key
    (error "No key %s in `parley-wire-meta-keys'" key)))

(defmacro parley-wire-meta (object key)
  "Return KEY of OBJECT's `_meta.parley' (nil when absent).
KEY is a keyword of `parley-wire-meta-keys', checked when expanded."
  `(plist-get (plist-get (plist-get ,object :_meta) :parley) ,(parley-wire--key key)))

(defun parley-wire-meta-object (object)
  "Return OBJECT's `_meta.parley' object (a plist), or nil."
  (plist-get (plist-get object :_meta) :parley))

(defun parley-wire-with-meta (&rest parley)
  "Return a `_meta' field holding PARLEY as `_meta.parley'.
PARLEY is a plist of keys of `parley-wire-meta-keys'."
  (let ((rest parley))
    (while rest
      (parley-wire--key (car rest))
      (setq rest (cddr rest))))
  (list :_meta (list :parley parley)))

(provide 'parley-wire)
;;; parley-wire.el ends here
