#!/bin/busybox sh
# /init of the test guest (tests/vm/run.sh builds the initramfs). Mounts the pseudo file
# systems, runs the scenarios and powers off; the host reads the console.
/bin/busybox --install -s /bin
export PATH=/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /var/run /var/log
# Kernel warnings would interleave with our lines on the same console.
echo 1 >/proc/sys/kernel/printk

# Boot time, as the guest sees it. The leading newline ends whatever the firmware left
# on the console's last line.
echo
echo "NSTEST_BOOTED uptime=$(cut -d' ' -f1 /proc/uptime) cpus=$(cat /sys/devices/system/cpu/online) nodes=$(cat /sys/devices/system/node/online)"
if [ -f /etc/nstest.conf ]; then
  sh /bin/scenarios.sh
else
  echo "FAIL boot: /etc/nstest.conf missing from the initramfs"
fi
echo "NSTEST_END uptime=$(cut -d' ' -f1 /proc/uptime)"
sync
poweroff -f
