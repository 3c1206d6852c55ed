;;; parley-wire-test.el --- The wire's names, declared once  -*- lexical-binding: t; -*-

;;; Commentary:

;; parley-wire.el's tables: each kind of `session/update' it names is
;; one of ACP's (its official JSON Schema, tests/acp-schema, which
;; scripts/install fetches for the conformance tests too), a kind is
;; read and written through the table, and a `_meta.parley' key the
;; table does not declare is refused where the code names it.

;;; Code:

(require 'ert)
(require 'parley-wire)

(defconst parley-wire-test--schema
  (expand-file-name
   "../../tests/acp-schema/node_modules/@agentclientprotocol/sdk/schema/v1/schema.json"
   (file-name-directory (or load-file-name buffer-file-name)))
  "ACP's JSON Schema, as the server's conformance tests read it.")

(defun parley-wire-test--acp-kinds ()
  "Return the kinds of `SessionUpdate' in ACP's schema."
  (let* ((schema (with-temp-buffer
                   (insert-file-contents parley-wire-test--schema)
                   (json-parse-buffer :object-type 'hash-table :array-type 'list)))
         (update (gethash "SessionUpdate" (gethash "$defs" schema))))
    (mapcar (lambda (variant)
              (gethash "const" (gethash "sessionUpdate" (gethash "properties" variant))))
            (gethash "oneOf" update))))

(ert-deftest parley-wire-update-kinds-are-acps ()
  (unless (file-exists-p parley-wire-test--schema)
    (ert-skip "ACP's schema is not installed: run scripts/install"))
  (let ((acp (parley-wire-test--acp-kinds)))
    (should (> (length acp) 10))
    (pcase-dolist (`(,name . ,kind) parley-wire-update-kinds)
      (ert-info ((format "%s: %s" name kind))
        (should (member kind acp))))))

(ert-deftest parley-wire-kinds-read-and-written-through-the-table ()
  (should (eq (parley-wire-kind '(:sessionUpdate "tool_call_update" :toolCallId "c1"))
              'tool-call-update))
  (should-not (parley-wire-kind '(:sessionUpdate "hologram_chunk")))
  (should (equal (parley-wire-update 'message :messageId "m1")
                 '(:sessionUpdate "agent_message_chunk" :messageId "m1")))
  (should-error (parley-wire-update 'hologram))
  ;; Every name of the table, written and read back.
  (pcase-dolist (`(,name . ,_) parley-wire-update-kinds)
    (should (eq (parley-wire-kind (parley-wire-update name)) name))))

(ert-deftest parley-wire-meta-keys-declared-once ()
  (let ((update (append '(:sessionUpdate "agent_message_chunk")
                        (parley-wire-with-meta :notice '(:level "info")))))
    (should (equal (parley-wire-meta update :notice) '(:level "info")))
    (should-not (parley-wire-meta update :replaces)))
  ;; A key the table does not declare: refused where the code names it.
  (should-error (macroexpand '(parley-wire-meta update :noticee)))
  (should-error (parley-wire-with-meta :retyr t)))

(provide 'parley-wire-test)
;;; parley-wire-test.el ends here
