;;; parley-test-timeout-test.el --- The ERT time limit itself  -*- lexical-binding: t; -*-

;;; Commentary:

;; A test that waits forever fails at its limit, with the stack it
;; waited in; a test within its limit runs as before, and leaves no
;; timer behind.

;;; Code:

(require 'ert)
(require 'parley-test-timeout)
(require 'seq)

(defun parley-test-timeout-test--hang ()
  "Wait forever, as a hung test waits for an answer that never comes."
  (sleep-for 3600))

(ert-deftest parley-test-timeout-fails-a-hung-test-with-its-stack ()
  (let* ((hung (make-ert-test :name 'parley-test-timeout-test--hung
                              :body #'parley-test-timeout-test--hang))
         (started (float-time))
         (failure (should-error (funcall (ert-test-body (parley-test-timeout-wrap hung 1)))
                                :type 'ert-test-failed))
         (data (cadr failure)))
    (should (< (- (float-time) started) 10))
    (should (equal (car data) "parley-test-timeout-test--hung timed out after 1 s"))
    ;; Where it waited: in `sleep-for', called by the test's own function.
    (should (equal (seq-take (plist-get (cdr data) :waiting-in) 2)
                   '(sleep-for parley-test-timeout-test--hang)))))

(ert-deftest parley-test-timeout-lets-a-test-within-its-limit-run ()
  (let* ((ran nil)
         (quick (make-ert-test :name 'parley-test-timeout-test--quick
                               :body (lambda () (sleep-for 0.05) (setq ran t))))
         (timers (length timer-list)))
    (funcall (ert-test-body (parley-test-timeout-wrap quick 1)))
    (should ran)
    (should (= (length timer-list) timers))))

(provide 'parley-test-timeout-test)

;;; parley-test-timeout-test.el ends here
