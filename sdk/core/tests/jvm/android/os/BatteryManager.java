package android.os;

/** Stand-in gauge: the test sets what it reads. */
public class BatteryManager {
    public static final int BATTERY_PROPERTY_CURRENT_NOW = 2;
    static volatile int microamps;
    public static volatile int millivolts;
    public static volatile int plugged;

    public static void set(int microamps, int millivolts, int plugged) {
        BatteryManager.microamps = microamps;
        BatteryManager.millivolts = millivolts;
        BatteryManager.plugged = plugged;
    }

    public int getIntProperty(int id) {
        return id == BATTERY_PROPERTY_CURRENT_NOW ? microamps : Integer.MIN_VALUE;
    }
}
