#!/usr/bin/python3
"""console-timing.py URL KEY ACCOUNT RUNS - bench/console.sh's browser half.

Loads URL/console/#/account/ACCOUNT RUNS times (after one warm-up) in
headless Chromium with the key in sessionStorage, and reads the page's own
timings: the 'console-account-ready' mark (app.js, set when the account's
figures are in the page) from navigation start, the bytes transferred
(navigation and every resource), and the balance request's duration.
"""
import statistics
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

url, key, account, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
opts = webdriver.ChromeOptions()
for a in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
          '--window-size=1280,1000', '--disable-extensions', '--disable-background-networking'):
    opts.add_argument(a)
opts.binary_location = '/usr/bin/chromium'
d = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=opts)
READ = """
var r = performance.getEntriesByName('console-account-ready');
if (!r.length) return null;
var n = performance.getEntriesByType('navigation')[0];
var res = performance.getEntriesByType('resource');
var bal = res.filter(e => e.name.indexOf('/balance') >= 0);
return [r[0].startTime, res.reduce((t, e) => t + e.transferSize, n.transferSize),
        bal.length ? bal[0].duration : null, res.length + 1];
"""
try:
    d.get(url + '/console/')
    d.execute_script("sessionStorage.setItem('billing.console.key', arguments[0])", key)
    ready, size, balance = [], [], []
    for i in range(runs + 1):
        d.get('about:blank')
        d.get(url + '/console/#/account/' + account)
        t = WebDriverWait(d, 30, poll_frequency=0.01).until(lambda d: d.execute_script(READ))
        if i == 0:
            continue  # warm-up: the first load compiles the script
        ready.append(t[0])
        size.append(t[1])
        balance.append(t[2])
        requests = t[3]
finally:
    d.quit()
ready.sort()
med = statistics.median(ready)
bmed = statistics.median(balance)
print('console account page (%s): %d bytes in %d requests; interactive median %.1f ms, '
      'p90 %.1f ms over %d loads' % (account, max(size), requests, med,
                                     ready[int(0.9 * (len(ready) - 1))], runs))
print('baseline, the balance request alone: median %.1f ms; page / baseline = %.2f'
      % (bmed, med / bmed))
